"""Benchmark: data contract validation on 1M rows x 25 columns, and per-record throughput.

Not a test. Run with ``.venv/bin/python benchmarks/contract_bench.py [--rows N]``.

It measures, on a synthetic frame (20 float columns, 2 int, 2 string, 1 datetime) and
a 25-column contract with 101 rules (one GX expectation each):

- raw GX: the suite compiled from the contract, validated with GX alone on a warm
  ephemeral context (same result format), as a GX user would run it;
- driftgate: :func:`data_contracts.validate_batch` on the same frame (compilation,
  the same GX run, and turning results into RuleResults);
- the per-record validator on the frame's first records (records/s).

Each batch figure is the median of ``--repeats`` runs after one warm-up run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from driftgate.data_contracts import Contract, RecordValidator, validate_batch

FLOAT_COLUMNS = 20


def synthetic_frame(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data: dict[str, object] = {f"f{i:02d}": rng.standard_normal(rows) for i in range(FLOAT_COLUMNS)}
    data["count_a"] = rng.integers(0, 100, rows)
    data["count_b"] = rng.integers(0, 5, rows)
    data["colour"] = rng.choice(np.array(["red", "green", "blue"], dtype=object), rows)
    data["size"] = rng.choice(np.array(["S", "M", "L", "XL"], dtype=object), rows)
    data["timestamp"] = pd.date_range("2000-01-01", periods=rows, freq="min")
    return pd.DataFrame(data)


def bench_contract() -> Contract:
    columns: dict[str, dict] = {}
    for i in range(FLOAT_COLUMNS):
        if i < 18:
            columns[f"f{i:02d}"] = {"dtype": "float", "nullable": False, "min": -8, "max": 8}
        else:  # no range: these get the finite rule
            columns[f"f{i:02d}"] = {"dtype": "float", "max_null_share": 0.05}
    columns["count_a"] = {"dtype": "int", "nullable": False, "min": 0, "max": 99}
    columns["count_b"] = {"dtype": "int", "nullable": False, "categories": [0, 1, 2, 3, 4]}
    columns["colour"] = {
        "dtype": "string",
        "nullable": False,
        "categories": ["red", "green", "blue"],
    }
    columns["size"] = {"dtype": "string", "nullable": True, "categories": ["S", "M", "L", "XL"]}
    columns["timestamp"] = {"dtype": "datetime", "nullable": False, "unique": True}
    return Contract.model_validate({"name": "bench", "columns": columns})


def median_seconds(function, repeats: int) -> float:
    function()  # warm-up: GX import, context, caches
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()

    from driftgate.data_contracts.gx_suite import compile_suite, gx_runtime, result_format

    frame = synthetic_frame(args.rows)
    contract = bench_contract()
    suite = compile_suite(contract)
    runtime = gx_runtime()
    print(
        f"frame: {len(frame):,} rows x {frame.shape[1]} columns; "
        f"contract: {len(contract.rules())} rules, suite: {len(suite.expectations)} expectations"
    )

    def raw_gx() -> None:
        batch = runtime.batch_definition.get_batch(batch_parameters={"dataframe": frame})
        outcome = batch.validate(suite, result_format=result_format(5))
        assert outcome.success

    def driftgate() -> None:
        assert validate_batch(contract, frame).passed

    raw = median_seconds(raw_gx, args.repeats)
    ours = median_seconds(driftgate, args.repeats)
    print(f"raw GX (same suite):        {raw:7.2f} s")
    overhead = f"overhead {ours - raw:+.2f} s, {ours / raw - 1:+.1%}"
    print(f"driftgate validate_batch:   {ours:7.2f} s  ({overhead})")

    validator = RecordValidator.from_contract(contract)
    records = frame.iloc[: args.records].to_dict("records")
    started = time.perf_counter()
    invalid = sum(1 for record in records if validator.validate(record))
    seconds = time.perf_counter() - started
    assert invalid == 0
    print(
        f"RecordValidator:            {len(records) / seconds:,.0f} records/s "
        f"({seconds / len(records) * 1e6:.1f} us per 25-field record)"
    )


if __name__ == "__main__":
    main()
