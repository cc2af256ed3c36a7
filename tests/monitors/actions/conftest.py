"""Ports for the action tests: the real review, control and monitor-state stores on
SQLite. The model registry's tag call is recorded instead: tagging a real MLflow model
version is covered end to end by tests/driftgate/test_drift_check_job.py."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest

from driftgate.monitors.actions import ActionPorts, ActionRequest
from driftgate.monitors.rules import MonitorResult
from driftgate.stores.control import ControlStore
from driftgate.stores.monitor_state import MonitorStateStore
from driftgate.stores.reviews import ReviewStore

W1 = (pd.Timestamp("2030-01-01", tz="UTC"), pd.Timestamp("2030-01-02", tz="UTC"))
W2 = (pd.Timestamp("2030-01-02", tz="UTC"), pd.Timestamp("2030-01-03", tz="UTC"))


@dataclass
class Stores:
    reviews: ReviewStore
    control: ControlStore
    state: MonitorStateStore
    tags: list
    ports: ActionPorts


@pytest.fixture
def stores(tmp_path):
    url = f"sqlite:///{tmp_path / 'control.db'}"
    reviews, control, state = ReviewStore(url), ControlStore(url), MonitorStateStore(url)
    tags: list = []
    ports = ActionPorts(
        reviews=reviews,
        pause=control.pause,
        tag_model_version=lambda name, version, values: tags.append((name, version, values)),
        ledger=state,
    )
    yield Stores(reviews, control, state, tags, ports)
    for store in (reviews, control, state):
        store.close()


def request(window=W1, monitor="missing-values", action="pause_inference") -> ActionRequest:
    return ActionRequest(
        model_name="m",
        model_version="3",
        start=window[0],
        end=window[1],
        result=MonitorResult(
            monitor=monitor,
            metric="missing_share",
            action=action,
            threshold=0.05,
            breached=True,
            observed=0.1,
            breached_features=["dew_point"],
        ),
        evidence=["runs:/abc"],
    )
