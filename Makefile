# driftgate — `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
# The CPU build of torch; override e.g. `make TORCH_SPEC='torch==2.14.1' test`.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help install demo test check soak lint format clean

help:  ## show this help
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH_SPEC)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv: pinned torch first, then driftgate with its test extras

demo: $(STAMP)  ## the main job: train, log and register the model on embedded defaults
	$(BIN)/driftgate demo

# The whole suite in two runs that together select exactly -m "not slow": first every
# test but the `serial` ones on two workers, a module per worker at a time (module
# fixtures such as a trained model are built once), the longest modules first
# (tests/conftest.py: LONGEST_MODULES; `--no-loadscope-reorder` keeps that order) so both
# workers finish together; then the `serial` modules alone, since they assert
# recoveries, latencies and kill timings that a second worker's load would make flaky
# (that run imports only the folders that may hold them: tests/conftest.py, SERIAL_FOLDERS).
test: $(STAMP)  ## lint, then the whole test suite (soak variants excluded: make soak)
	$(BIN)/ruff check .
	$(BIN)/pytest -m "not slow and not serial" -n 2 --dist loadfile --no-loadscope-reorder
	$(BIN)/pytest -m "not slow and serial"

# `make check` never imports the integration folders and modules (tests/conftest.py).
check: $(STAMP)  ## the inner loop: lint + the tests that need no model, server or flow (under 2 min)
	$(BIN)/ruff check .
	$(BIN)/pytest -m "not slow and not integration" -n 2

soak: $(STAMP)  ## the long-running variants of the reliability tests (marker: slow)
	$(BIN)/pytest -m slow

lint: $(STAMP)  ## ruff check + format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)  ## apply ruff's formatter and fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:  ## remove local stores and reports (keeps .venv)
	rm -rf .driftgate reports
