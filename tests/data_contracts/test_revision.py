"""Contract revision proposals (issue 29): widen exactly what refused traffic needs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftgate.data_contracts import Contract, RecordValidator
from driftgate.data_contracts.revision import propose_revision

CONTRACT = Contract.from_yaml(
    """
name: toy
version: 3
columns:
  pressure: {dtype: float, nullable: true, max_null_share: 0.05, min: -1.0, max: 1.0}
  wind: {dtype: float, nullable: false, min: 0.0, max: 5.0}
  station: {dtype: string, nullable: false, categories: [north, south]}
  gauge: {dtype: float, nullable: false, min: 0.0, max: 10.0}
"""
)


def traffic(rows: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Pressure moved up past its max (a third of the records out of range), one
    corrupt reading far out; a new station; wind and gauge as promised."""
    rng = np.random.default_rng(seed)
    pressure = rng.uniform(0.0, 1.6, rows)
    pressure[0] = 95.0  # a corrupt reading: no quantile moves for it
    return pd.DataFrame(
        {
            "pressure": pressure,
            "wind": rng.uniform(0.5, 4.5, rows),
            "station": rng.choice(["north", "south", "east"], rows),
            "gauge": rng.uniform(0.0, 10.0, rows),
        }
    )


def refusals_of(contract: Contract, received: pd.DataFrame) -> dict[str, int]:
    """Rule id -> records it refuses, as the service's validator judges them."""
    validator, counts = RecordValidator.from_contract(contract), {}
    for record in received.to_dict("records"):
        for error in validator.validate(record):
            counts[error.rule] = counts.get(error.rule, 0) + 1
    return counts


def test_only_the_rules_that_refused_records_are_widened_and_every_other_rule_kept():
    received = traffic()
    refusals = refusals_of(CONTRACT, received)
    assert set(refusals) == {"columns.pressure.range", "columns.station.categories"}
    revision = propose_revision(CONTRACT, received, refusals, refused=400)

    changed = {change.key for change in revision.changes}
    assert changed == {"columns.pressure.max", "columns.station.categories"}
    revised = revision.revised.columns
    assert revised["pressure"].min == -1.0  # nothing went below: the bound stays
    assert 1.6 <= revised["pressure"].max < 3.0  # the traffic's range, not the outlier's
    assert revised["station"].categories == ["north", "south", "east"]  # listed keep order
    for column in ("wind", "gauge"):
        assert revised[column] == CONTRACT.columns[column]
    assert revised["pressure"].max_null_share == 0.05
    assert revision.revised.version == 4
    # The revised contract lets the recent traffic through, but the corrupt reading.
    assert refusals_of(revision.revised, received) == {"columns.pressure.range": 1}
    lines = revision.diff_lines()
    assert lines[0] == "contract 'toy' v3 -> v4, from 1000 received records (400 refused)"
    assert any(line.strip().startswith("columns.pressure.max: 1.0 -> ") for line in lines)


def test_a_null_refusal_widens_the_null_share_and_makes_the_column_nullable():
    received = traffic().assign(wind=lambda f: f["wind"].mask(f.index % 10 == 0))
    refusals = refusals_of(CONTRACT, received)
    assert refusals["columns.wind.nulls"] == 100
    revision = propose_revision(CONTRACT, received, {"columns.wind.nulls": 100})
    wind = revision.revised.columns["wind"]
    assert (wind.nullable, wind.max_null_share) == (True, 0.16)  # 10% * 1.5 + 1 point
    assert [c.key for c in revision.changes] == ["columns.wind.nullable",
                                                  "columns.wind.max_null_share"]  # fmt: skip


def test_rules_no_traffic_can_widen_are_left_with_their_counts():
    revision = propose_revision(
        CONTRACT,
        traffic(),
        {"columns.wind.dtype": 7, "model.feature": 2, "request.other_record": 9},
    )
    assert not revision.changed and revision.revised == CONTRACT
    assert [(left.rule, left.records) for left in revision.left] == [
        ("columns.wind.dtype", 7),
        ("model.feature", 2),
    ]
    assert "nothing to widen" in revision.diff_lines()[0]


@pytest.mark.parametrize("seed", [1, 2])
def test_traffic_inside_the_contract_proposes_nothing(seed):
    received = traffic(seed=seed).assign(
        pressure=lambda f: f["pressure"].clip(upper=0.9), station="north"
    )
    revision = propose_revision(CONTRACT, received, {"columns.pressure.range": 1})
    assert not revision.changed
    assert revision.left[0].why == "the recent values need no wider rule"
