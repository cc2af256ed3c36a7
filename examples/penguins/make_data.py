"""Write the penguins example's three files from the ``palmerpenguins`` package.

The 344 penguins of the Palmer Archipelago (2007-2009, three species) ship inside the
PyPI package ``palmerpenguins`` (0.1.6), so nothing downloads. Each penguin gets:

* ``penguin_id``: ``PAL-<row>``, its row in the package's table: the id column
  (``data.labels.key``) that ``driftgate replay`` derives request ids from;
* ``observed_at``: a time-zone-aware UTC time in the breeding season of its study
  year (the package has only the year): 1 November + a seeded day (0..44) and second
  of the day, written with its offset (``2009-11-14T06:12:09+00:00``);
* ``male``: a boolean derived from ``sex`` (true/false; empty where the sex was not
  recorded), which replaces it.

Files:

* ``reference.csv``: 2007 and 2008, with the species: train/validation/test, every row
  kept: the model learns missing values (a numeric feature's training mean and a
  missing indicator, ``male``'s own missing level), and the reference profile records
  each feature's missing share (the missing-share monitor measures the rise over it);
* ``production.csv``: 2009, without the species, every row kept: its missing values
  reach the service as production data does;
* ``labels.csv``: ``penguin_id`` and ``species`` of the production rows, the labels
  that arrive later (``driftgate replay --labels-after``).

    python examples/penguins/make_data.py     # (re)writes the three files here
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 30
FEATURES = ["island", "bill_length_mm", "bill_depth_mm", "flipper_length_mm",
            "body_mass_g", "male"]  # fmt: skip
PRODUCTION_YEAR = 2009
FILES = ("reference.csv", "production.csv", "labels.csv")


def penguins_frame() -> pd.DataFrame:
    from palmerpenguins import load_penguins

    frame = load_penguins()
    rng = np.random.default_rng(SEED)
    season = pd.to_datetime(frame["year"].astype(str) + "-11-01").dt.tz_localize("UTC")
    offsets = pd.to_timedelta(rng.integers(0, 45, len(frame)), unit="D") + pd.to_timedelta(
        rng.integers(0, 86_400, len(frame)), unit="s"
    )
    out = pd.DataFrame(
        {
            "penguin_id": [f"PAL-{i:03d}" for i in range(len(frame))],
            "observed_at": season + offsets,
            "island": frame["island"],
            "bill_length_mm": frame["bill_length_mm"],
            "bill_depth_mm": frame["bill_depth_mm"],
            "flipper_length_mm": frame["flipper_length_mm"],
            "body_mass_g": frame["body_mass_g"],
            # Nullable: a penguin whose sex was not recorded is neither.
            "male": frame["sex"].map({"male": True, "female": False}).astype("boolean"),
            "species": frame["species"],
            "year": frame["year"],
        }
    )
    return out.sort_values("observed_at", kind="mergesort").reset_index(drop=True)


def split_files(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    later = frame["year"] == PRODUCTION_YEAR
    reference = frame[~later]  # incomplete rows too: missing values are learnt
    production = frame[later]
    return {
        "reference.csv": reference.drop(columns="year"),
        "production.csv": production.drop(columns=["year", "species"]),
        "labels.csv": production[["penguin_id", "species"]],
    }


def main(destination: Path) -> Path:
    """Write the files into ``destination`` (a folder); returns it."""
    destination.mkdir(parents=True, exist_ok=True)
    for name, table in split_files(penguins_frame()).items():
        table.to_csv(destination / name, index=False, date_format="%Y-%m-%dT%H:%M:%S%z")
    return destination


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    print(main(target))
