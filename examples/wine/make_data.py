"""Write ``wine.csv``: scikit-learn's bundled wine data set, shuffled, with a drift.

The 178 wines (13 chemical measurements, 3 cultivars) ship inside scikit-learn, so
nothing downloads. The rows are shuffled with a fixed seed (the bundled file is sorted
by cultivar, and driftgate splits in time order); row ``i`` is dated 2024-01-01 + ``i``
days in its ``date`` column (``data.time_column``). The last ``PRODUCTION_ROWS`` rows
are the production period, and there the drift is injected: ``alcohol`` and
``color_intensity`` are moved up by two standard deviations of the whole set, as a new
supplier's grapes might.

    python examples/wine/make_data.py            # writes examples/wine/wine.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 14
REFERENCE_ROWS = 130  # driftgate.yaml: data.reference_rows
DRIFTED = ("alcohol", "color_intensity")
SHIFT_STDS = 2.0


def wine_frame():
    from sklearn.datasets import load_wine

    frame = load_wine(as_frame=True).frame
    frame = frame.rename(columns={"od280/od315_of_diluted_wines": "od280_od315"})
    frame["cultivar"] = frame.pop("target").map({0: "barolo", 1: "grignolino", 2: "barbera"})
    order = np.random.default_rng(SEED).permutation(len(frame))
    frame = frame.iloc[order].reset_index(drop=True)
    # One row a day: the example's time column (data.time_column: date).
    days = pd.date_range("2024-01-01", periods=len(frame), freq="D")
    frame.insert(0, "date", days.strftime("%Y-%m-%d"))
    for column in DRIFTED:
        frame.loc[REFERENCE_ROWS:, column] += SHIFT_STDS * frame[column].std()
    return frame


def main(destination: Path) -> Path:
    wine_frame().to_csv(destination, index=False, float_format="%.6g")
    return destination


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("wine.csv")
    print(main(target))
