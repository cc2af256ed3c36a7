"""A team's own training, outside driftgate: plain torch, logged with MLflow.

This is what `driftgate adopt` is for. Nothing here imports driftgate:

1. write the data set scikit-learn ships (``load_breast_cancer``: 569 tumours, 30
   numeric features, target ``benign`` 1/0) to ``data/``, shuffled with seed 0:
   ``breast_cancer.csv`` (all rows; the project's ``data.source``), ``reference.csv``
   (its first 400 rows: the reference period) and ``production.csv`` (the other 169,
   with a drift injected: ``mean_texture`` and ``worst_texture`` x 1.5, as a new
   scanner calibration would);
2. train the team's own ``nn.Module`` on the first 340 rows (driftgate's train and
   validation split of the reference period; its test split, rows 340-399, stays
   unseen);
3. log it with ``mlflow.pytorch.log_model`` (the pt2 format, MLflow's default) with a
   float32 input example, to the project's tracking store; print the run's model URI.

    python train_elsewhere.py            # then: driftgate adopt runs:/<RUN_ID>/model ...
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
TARGET = "benign"
REFERENCE_ROWS = 400
TRAIN_ROWS = 340
DRIFTED = ("mean_texture", "worst_texture")
DRIFT_FACTOR = 1.5


class TumourNet(nn.Module):
    """The team's model: standardisation inside, a small MLP, P(benign) out."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor, hidden: int = 16) -> None:
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.layers = nn.Sequential(nn.Linear(len(mean), hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.layers((x - self.mean) / self.std)).squeeze(-1)


def write_data(folder: Path) -> pd.DataFrame:
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer(as_frame=True)
    frame = bunch.frame.rename(columns={"target": TARGET})
    frame.columns = [
        "_".join(str(c).split()) for c in frame.columns
    ]  # "mean radius" -> mean_radius
    frame = frame.sample(frac=1.0, random_state=0).reset_index(drop=True)
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_csv(folder / "breast_cancer.csv", index=False)
    frame.iloc[:REFERENCE_ROWS].to_csv(folder / "reference.csv", index=False)
    production = frame.iloc[REFERENCE_ROWS:].copy()
    for column in DRIFTED:
        production[column] = production[column] * DRIFT_FACTOR
    production.to_csv(folder / "production.csv", index=False)
    return frame


def train(frame: pd.DataFrame, epochs: int = 300, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    features = [c for c in frame.columns if c != TARGET]
    x = torch.tensor(frame[features].iloc[:TRAIN_ROWS].to_numpy(np.float32))
    y = torch.tensor(frame[TARGET].iloc[:TRAIN_ROWS].to_numpy(np.float32))
    model = TumourNet(x.mean(0), x.std(0))
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-3)
    loss = nn.BCELoss()
    for _ in range(epochs):
        optimiser.zero_grad()
        loss(model(x), y).backward()
        optimiser.step()
    return model.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=HERE, help="the example's folder")
    parser.add_argument("--register", metavar="NAME", help="also register it as NAME")
    args = parser.parse_args()
    import mlflow

    home = args.project.resolve() / ".driftgate"  # driftgate.yaml's `home`
    home.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    frame = write_data(args.project / "data")
    model = train(frame)
    experiment = "trained-elsewhere"
    if mlflow.get_experiment_by_name(experiment) is None:
        mlflow.create_experiment(experiment, artifact_location=(home / "mlartifacts").as_uri())
    mlflow.set_experiment(experiment)
    example = frame.drop(columns=TARGET).head(5).to_numpy(np.float32)
    with mlflow.start_run(run_name="tumour-net") as run:
        mlflow.log_params({"epochs": 300, "hidden": 16, "train_rows": TRAIN_ROWS})
        mlflow.pytorch.log_model(
            model, name="model", input_example=example, registered_model_name=args.register
        )
    print(f"runs:/{run.info.run_id}/model")


if __name__ == "__main__":
    main()
