"""check_drift: decisions, corrections, the effect-size floor, edge cases, streaming."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftgate.monitors import (
    DriftConfigError,
    MissingColumnError,
    ReferenceProfile,
    UnknownStatTestError,
    adjust_p_values,
    check_drift,
)

ALL_TESTS = ["ks", "kl", "psi", "js", "wasserstein", "chi2", "missing_share", "mean_shift"]


@pytest.fixture
def reference(rng) -> pd.DataFrame:
    n = 3000
    return pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "k": rng.poisson(4, n).astype(float),
            "c": rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]),
        }
    )


@pytest.fixture
def profile(reference) -> ReferenceProfile:
    return ReferenceProfile.fit(reference, sample_rows=0)


def test_one_result_per_feature_and_applicable_test(profile, reference):
    report = check_drift(profile, reference, tests=ALL_TESTS)
    pairs = {(r.feature, r.test) for r in report.results}
    assert ("x", "chi2") not in pairs and ("c", "ks") not in pairs
    assert len(report.results) == 2 * 7 + 5
    assert not report.dataset_drifted and report.share_drifted == 0.0


def test_identical_data_gives_zero_distances(profile, reference):
    report = check_drift(profile, reference, tests=ALL_TESTS)
    for result in report.results:
        assert not result.drifted
        if result.direction == "distance":
            assert result.value == pytest.approx(0.0, abs=1e-9)


def test_shift_is_flagged_and_summarised(profile, rng):
    current = pd.DataFrame(
        {
            "x": rng.normal(1.0, 1, 2000),
            "k": rng.poisson(4, 2000).astype(float),
            "c": rng.choice(["a", "b", "c"], 2000, p=[0.2, 0.3, 0.5]),
        }
    )
    report = check_drift(profile, current)
    assert report.drifted_features == ["x", "c"]
    assert report.share_drifted == pytest.approx(2 / 3) and report.dataset_drifted
    assert report.result("x", "ks").p_value < 1e-10


def test_effect_size_floor_stops_negligible_shifts_on_large_samples(rng):
    reference = pd.DataFrame({"x": rng.normal(size=200_000)})
    profile = ReferenceProfile.fit(reference, sample_rows=0)
    current = pd.DataFrame({"x": rng.normal(0.03, 1, 200_000)})
    floored = check_drift(profile, current, tests=["ks"]).result("x", "ks")
    assert floored.p_value < 1e-6 and floored.effect_size < 0.05
    assert not floored.drifted
    unfloored = check_drift(profile, current, tests=["ks"], effect_size_floor=0)
    assert unfloored.result("x", "ks").drifted


def test_thresholds_override_defaults(profile, reference):
    report = check_drift(
        profile, reference.iloc[:500], tests=["psi", "ks"], thresholds={"psi": 0.0, "ks": 1.0}
    )
    assert report.result("x", "psi").threshold == 0.0 and report.result("x", "psi").drifted
    assert report.result("x", "ks").threshold == 1.0


def test_bonferroni_and_bh_adjusted_p_values():
    p = [0.01, 0.04, 0.03, 0.005]
    assert adjust_p_values(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    # BH: sorted 0.005, 0.01, 0.03, 0.04 -> 0.02, 0.02, 0.04, 0.04 (step-up minimum).
    assert adjust_p_values(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust_p_values(p, None) == p
    with pytest.raises(DriftConfigError, match="holm"):
        adjust_p_values(p, "holm")


def test_correction_is_applied_to_the_report(profile, reference, rng):
    current = reference.sample(800, random_state=1).assign(x=lambda d: d.x + 0.12)
    plain = check_drift(profile, current, tests=["ks"], effect_size_floor=0)
    corrected = check_drift(
        profile, current, tests=["ks"], correction="bonferroni", effect_size_floor=0
    )
    raw = plain.result("x", "ks").p_value
    assert corrected.result("x", "ks").adjusted_p_value == pytest.approx(min(1, 2 * raw))
    assert corrected.correction == "bonferroni"


def test_missing_column_is_named(profile, reference):
    with pytest.raises(MissingColumnError, match=r"\['k'\]"):
        check_drift(profile, reference.drop(columns=["k"]))
    chunks = [reference.iloc[:10], reference.iloc[10:20].drop(columns=["c"])]
    with pytest.raises(MissingColumnError, match=r"chunk 1.*\['c'\]"):
        check_drift(profile, iter(chunks))


def test_new_column_is_reported_not_checked(profile, reference):
    report = check_drift(profile, reference.assign(extra=1))
    assert report.unexpected_columns == ["extra"]
    assert "extra" not in report.features


def test_empty_window_is_reported(profile, reference):
    for empty in (reference.iloc[:0], iter([])):
        report = check_drift(profile, empty, tests=ALL_TESTS)
        assert report.rows == 0 and not report.dataset_drifted
        assert all(r.status == "no_data" and not r.drifted for r in report.results)
        json.dumps(report.to_dict(), allow_nan=False)


def test_all_nan_column_is_reported_and_missing_share_flags_it(profile, reference):
    current = reference.iloc[:100].assign(x=np.nan, c=None)
    report = check_drift(profile, current, tests=ALL_TESTS)
    assert report.result("x", "ks").status == "no_data"
    assert "no non-missing" in report.result("x", "ks").reason
    assert report.result("x", "missing_share").value == 1.0
    assert report.result("x", "missing_share").drifted
    assert report.features["x"].missing_count == 100
    assert report.features["c"].missing_share == 1.0


def test_one_row_and_constant_column(rng):
    reference = pd.DataFrame({"x": [2.0] * 50, "c": ["a"] * 50})
    profile = ReferenceProfile.fit(reference, sample_rows=0)
    one_row = check_drift(profile, pd.DataFrame({"x": [2.0], "c": ["a"]}), tests=ALL_TESTS)
    assert not one_row.dataset_drifted
    assert all(r.status == "ok" for r in one_row.results)
    moved = check_drift(profile, pd.DataFrame({"x": [3.0] * 5, "c": ["a"] * 5}), tests=ALL_TESTS)
    assert moved.result("x", "mean_shift").value == float("inf")
    assert moved.result("x", "ks").value == 1.0
    assert json.loads(json.dumps(moved.to_dict()))["results"][0]["feature"] == "x"


def test_unseen_category_and_infinities_are_counted(profile, reference):
    current = reference.iloc[:200].copy()
    current.loc[:9, "c"] = "new-city"
    current.loc[:4, "x"] = np.inf
    report = check_drift(profile, current)
    assert report.features["c"].unseen_categories == 1
    assert report.result("c", "chi2").details["unseen_categories"] == ["new-city"]
    assert report.features["x"].infinite_count == 5


def test_bad_arguments_fail_clearly(profile, reference):
    with pytest.raises(UnknownStatTestError, match="known stat tests"):
        check_drift(profile, reference, tests=["kolmogorov"])
    with pytest.raises(DriftConfigError, match=r"chi2.*numeric feature 'x'"):
        check_drift(profile, reference, tests={"x": ["chi2"]})
    with pytest.raises(DriftConfigError, match="correction"):
        check_drift(profile, reference, correction="holm")


def test_report_to_dict_and_metrics(profile, reference):
    report = check_drift(profile, reference.iloc[:300], tests=ALL_TESTS)
    document = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert document["results"][0].keys() >= {
        "feature",
        "test",
        "value",
        "p_value",
        "threshold",
        "drifted",
        "direction",
        "units",
    }
    metrics = report.metrics()
    assert metrics["drift.x.ks"] == report.result("x", "ks").value
    assert "drift.share_drifted" in metrics


frames = st.lists(
    st.tuples(
        st.one_of(st.floats(-100, 100), st.just(float("nan")), st.just(float("inf"))),
        st.sampled_from(["a", "b", "c", None, "d"]),
    ),
    min_size=0,
    max_size=60,
).map(lambda rows: pd.DataFrame(rows, columns=["x", "c"]).astype({"x": float, "c": object}))


def _values(report):
    return [(r.feature, r.test, r.status, r.value, r.p_value, r.drifted) for r in report.results]


@settings(max_examples=60, deadline=None)
@given(current=frames, chunk_rows=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_property_streaming_and_permutation_change_nothing(current, chunk_rows, seed):
    reference = pd.DataFrame({"x": np.linspace(-50, 50, 41), "c": (["a", "b", "c"] * 14)[:41]})
    profile = ReferenceProfile.fit(reference, sample_rows=0)
    one_shot = check_drift(profile, current, tests=ALL_TESTS)
    chunks = (current.iloc[i : i + chunk_rows] for i in range(0, len(current), chunk_rows))
    streamed = check_drift(profile, chunks, tests=ALL_TESTS)
    permuted = check_drift(profile, current.sample(frac=1, random_state=seed), tests=ALL_TESTS)
    for other in (streamed, permuted):
        for a, b in zip(_values(one_shot), _values(other), strict=True):
            assert a[:3] == b[:3]
            if a[1] in ("mean_shift", "wasserstein"):  # float sums: order can move last bits
                assert a[3] == pytest.approx(b[3], rel=1e-9, abs=1e-12, nan_ok=True)
            else:  # everything else comes from integer counts: bit-identical
                assert a[3] == b[3] or (np.isnan(a[3]) and np.isnan(b[3]))
                assert a[4] == b[4]
                assert a[5] == b[5]
