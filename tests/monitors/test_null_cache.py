"""The binned nulls kept on disk beside their profile (issue 32): read back, a null is
the one a fresh build gives; another profile, window size or build never reuses it."""

from __future__ import annotations

import numpy as np
import pytest

from driftgate.monitors import nulls
from tests.monitors.conftest import fit


@pytest.fixture(autouse=True)
def _fresh_caches():
    nulls.clear_cache()
    yield
    nulls.clear_cache()


def same_null(a: nulls.WeightedNull, b: nulls.WeightedNull) -> bool:
    return (
        a.n == b.n
        and np.array_equal(a.draws, b.draws)
        and np.array_equal(a.survival, b.survival)
        and a.tail_scale == b.tail_scale
        and a.mean == b.mean
    )


def key_of(test: str, profile, n: int) -> tuple:
    p, n_ref = nulls.null_population(profile.features["x"])
    return nulls._null_key(test, p, n_ref, n, nulls.NULL_DRAWS, categorical=False)


def test_a_null_read_from_disk_equals_a_fresh_build_and_answers_alike(rng, tmp_path):
    numeric = fit(rng.normal(size=3000))
    categorical = fit(
        rng.choice(list("abcdefg"), size=3000, p=[0.3, 0.2] + [0.1] * 5), "categorical"
    )
    for profile, test in ((numeric, "kl"), (categorical, "js")):
        reference = profile.features["x"]
        fresh = nulls.binned_null(test, reference, 30)  # no folder: built, memory only
        nulls.clear_cache()
        nulls.keep_nulls_in(profile, tmp_path)
        written = nulls.binned_null(test, reference, 30)  # built and written
        nulls.clear_cache()
        nulls.keep_nulls_in(profile, tmp_path)
        read = nulls.binned_null(test, reference, 30)  # read: nothing built
        assert same_null(fresh, written) and same_null(fresh, read)
        assert read.p_value(0.2) == fresh.p_value(0.2)
        assert read.critical_value(1e-6) == fresh.critical_value(1e-6)
    assert len(list(tmp_path.glob("*.npz"))) == 2


def test_the_null_is_read_not_built_when_its_file_is_there(rng, tmp_path, monkeypatch):
    profile = fit(rng.normal(size=3000))
    nulls.keep_nulls_in(profile, tmp_path)
    nulls.binned_null("kl", profile.features["x"], 40)
    nulls.clear_cache()
    nulls.keep_nulls_in(profile, tmp_path)
    built = []
    original = nulls._build_binned_null
    monkeypatch.setattr(
        nulls, "_build_binned_null", lambda *a, **k: built.append(a) or original(*a, **k)
    )
    nulls.binned_null("kl", profile.features["x"], 40)
    assert built == []
    nulls.binned_null("kl", profile.features["x"], 41)  # another size: built
    assert len(built) == 1


def test_another_profile_size_or_statistic_misses_the_file(rng, tmp_path):
    values = rng.poisson(2.0, size=3000).astype(float)  # ties: uneven bins
    profile = fit(values)
    nulls.keep_nulls_in(profile, tmp_path)
    nulls.binned_null("kl", profile.features["x"], 30)
    [kept] = tmp_path.glob("*.npz")
    key = key_of("kl", profile, 30)
    assert nulls._read_null(tmp_path, "kl", key) is not None

    # Another reference: other bin shares, or the same shares from fewer rows. (Two
    # features with the same bin counts share one null, kept or not: it is the same.)
    for other in (fit(rng.poisson(3.0, size=3000).astype(float)), fit(values[:2999])):
        assert key_of("kl", other, 30) != key
        assert nulls._read_null(tmp_path, "kl", key_of("kl", other, 30)) is None
    # Another window size, another statistic: other files.
    assert nulls._read_null(tmp_path, "kl", key_of("kl", profile, 31)) is None
    assert nulls._read_null(tmp_path, "psi", key_of("psi", profile, 30)) is None
    # A file whose identity does not match its name (renamed, another build): not used.
    with np.load(kept, allow_pickle=False) as stored:
        arrays = dict(stored)
    arrays["identity"] = np.array("another build")
    np.savez(kept, **arrays)
    assert nulls._read_null(tmp_path, "kl", key) is None
    # ... and a broken one neither; the null is built again and the file rewritten.
    kept.write_bytes(b"not a null")
    assert nulls._read_null(tmp_path, "kl", key) is None
    nulls.clear_cache()
    nulls.keep_nulls_in(profile, tmp_path)
    nulls.binned_null("kl", profile.features["x"], 30)
    assert nulls._read_null(tmp_path, "kl", key) is not None


def test_an_unwritable_folder_costs_a_rebuild_not_the_check(rng, tmp_path):
    profile = fit(rng.normal(size=3000))
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder would be")
    nulls.keep_nulls_in(profile, blocked)
    null = nulls.binned_null("kl", profile.features["x"], 30)
    assert null.n == 30 and blocked.is_file()
