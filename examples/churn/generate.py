"""Generate the churn example's data: seeded, nothing downloaded.

    python examples/churn/generate.py            # writes beside this file
    python examples/churn/generate.py --out DIR  # elsewhere (the test compares)

A subscription business: one row per customer contract, with CamelCase columns as a
data team would name them, and the churn label (``Churned``) in a file of its own, as
it arrives later from billing:

=================  ===========================================================
``CustomerId``     an id (unique): never a feature (``data.exclude``)
``timestamp``      when the contract was signed (a real time column)
``Region``         pandas ``category`` (North, South, East, West)
``PlanType``       plain text (Basic, Plus, Premium)
``PaymentMethod``  plain text with rare levels (Card, Transfer, Cash; Voucher and
                   Crypto under 1% each)
``TenureMonths``   int
``MonthlyCharges`` float
``SupportCalls``   int
``LegacyScore``    another model's churn score: never a feature (``data.exclude``)
``Churned``        0/1, in ``labels.csv`` keyed by ``CustomerId``
=================  ===========================================================

Files: ``reference.pq`` (Parquet, 6,000 contracts, 2024-01-01..2024-06-30, the
``Region`` category kept as a category), ``labels.csv`` and ``production.csv``
(4,000 contracts, 2024-07-01..2024-07-14, text as CSV has it, ``timestamp`` as ISO
8601 text). The production period's first week is drawn like the reference; from
2024-07-08 on a drift is injected: a new market opens in the West (Region West goes
from 10% to 55% of contracts), Premium plans double, monthly charges rise by 35% and
a new payment method, ``Wallet``, appears (the contract lets it in with ``unseen:
allow``; the model scores it in its unseen-category bucket).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20240701
REFERENCE_ROWS = 6_000
PRODUCTION_ROWS = 4_000
REGIONS = ["North", "South", "East", "West"]
PLANS = ["Basic", "Plus", "Premium"]
PAYMENTS = ["Card", "Transfer", "Cash", "Voucher", "Crypto"]
DRIFT_STARTS = pd.Timestamp("2024-07-08")


def _times(rng: np.random.Generator, start: str, end: str, rows: int) -> pd.DatetimeIndex:
    """``rows`` distinct whole-second times in ``[start, end)``, sorted."""
    low, high = pd.Timestamp(start).value // 10**9, pd.Timestamp(end).value // 10**9
    seconds = np.sort(rng.choice(high - low, size=rows, replace=False)) + low
    return pd.to_datetime(seconds, unit="s")


def _contracts(
    rng: np.random.Generator, times: pd.DatetimeIndex, first_id: int
) -> tuple[pd.DataFrame, np.ndarray]:
    rows = len(times)
    drifted = np.asarray(times >= DRIFT_STARTS)
    region_p = np.where(drifted[:, None], [0.15, 0.15, 0.15, 0.55], [0.35, 0.30, 0.25, 0.10])
    plan_p = np.where(drifted[:, None], [0.30, 0.30, 0.40], [0.50, 0.30, 0.20])
    region = np.array([rng.choice(REGIONS, p=p) for p in region_p])
    plan = np.array([rng.choice(PLANS, p=p) for p in plan_p])
    payment = rng.choice(PAYMENTS, size=rows, p=[0.55, 0.30, 0.135, 0.01, 0.005])
    payment = np.where(drifted & (rng.random(rows) < 0.12), "Wallet", payment)
    tenure = rng.integers(1, 73, size=rows)
    base = np.select([plan == "Basic", plan == "Plus"], [30.0, 55.0], 85.0)
    charges = np.round(base * rng.lognormal(0.0, 0.15, size=rows), 2)
    charges = np.where(drifted, np.round(charges * 1.35, 2), charges)
    calls = rng.poisson(1.2, size=rows)
    logit = (
        -0.4
        - 0.045 * tenure
        + 0.018 * (charges - 55.0)
        + 0.45 * calls
        + np.select([plan == "Basic", plan == "Plus"], [0.6, 0.1], -0.5)
        + np.select([region == "South", region == "West"], [0.4, -0.3], 0.0)
        + np.where(payment == "Cash", 0.7, 0.0)
        + np.where(payment == "Crypto", 1.2, 0.0)
    )
    churned = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))).astype("int64")
    legacy = np.clip(1.0 / (1.0 + np.exp(-(logit + rng.normal(0, 0.8, rows)))), 0, 1).round(4)
    frame = pd.DataFrame(
        {
            "CustomerId": np.arange(first_id, first_id + rows, dtype="int64"),
            "timestamp": times,
            "Region": pd.Categorical(region, categories=REGIONS),
            "PlanType": plan.astype(object),
            "PaymentMethod": payment.astype(object),
            "TenureMonths": tenure.astype("int64"),
            "MonthlyCharges": charges,
            "SupportCalls": calls.astype("int64"),
            "LegacyScore": legacy,
        }
    )
    return frame, churned


def generate(out: Path) -> dict[str, Path]:
    """Write the three files into ``out``; return name -> path."""
    rng = np.random.default_rng(SEED)
    reference, labels = _contracts(
        rng, _times(rng, "2024-01-01", "2024-07-01", REFERENCE_ROWS), first_id=100_000
    )
    production, _ = _contracts(
        rng, _times(rng, "2024-07-01", "2024-07-15", PRODUCTION_ROWS), first_id=200_000
    )
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "reference": out / "reference.pq",
        "labels": out / "labels.csv",
        "production": out / "production.csv",
    }
    reference.to_parquet(files["reference"], index=False)
    pd.DataFrame({"CustomerId": reference["CustomerId"], "Churned": labels}).to_csv(
        files["labels"], index=False
    )
    production.assign(timestamp=production["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%S")).to_csv(
        files["production"], index=False
    )
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    for name, path in generate(parser.parse_args().out).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
