"""Write ``diabetes.csv``: scikit-learn's bundled diabetes data set, shuffled, with a drift.

442 patients, ten baseline measurements (age, sex, body-mass index, blood pressure and
six serum values, as scikit-learn ships them: mean-centred and scaled) and the target,
a measure of disease progression one year later (25..346). Nothing downloads. Rows are
shuffled with a fixed seed; each row ``i`` is dated 2024-01-01 + ``i`` days
in its ``date`` column (``data.time_column``).
In the production period (the rows after ``REFERENCE_ROWS``) ``bmi`` and ``s5`` are
moved up by two standard deviations: a clinic with a heavier population.

    python examples/diabetes/make_data.py        # writes examples/diabetes/diabetes.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 14
REFERENCE_ROWS = 340  # driftgate.yaml: data.reference_rows
DRIFTED = ("bmi", "s5")
SHIFT_STDS = 2.0


def diabetes_frame():
    from sklearn.datasets import load_diabetes

    frame = load_diabetes(as_frame=True).frame.rename(columns={"target": "progression"})
    order = np.random.default_rng(SEED).permutation(len(frame))
    frame = frame.iloc[order].reset_index(drop=True)
    # One row a day: the example's time column (data.time_column: date).
    days = pd.date_range("2024-01-01", periods=len(frame), freq="D")
    frame.insert(0, "date", days.strftime("%Y-%m-%d"))
    for column in DRIFTED:
        frame.loc[REFERENCE_ROWS:, column] += SHIFT_STDS * frame[column].std()
    return frame


def main(destination: Path) -> Path:
    diabetes_frame().to_csv(destination, index=False, float_format="%.6g")
    return destination


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("diabetes.csv")
    print(main(target))
