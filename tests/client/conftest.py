"""A real service process on loopback serving a copy of the shipped default model (etth1-rsa version 5),
with a small series limit so that a handful of series takes several requests, and the repository API on."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.app.live import live_service

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "model_repository" / "etth1-rsa" / "5"
CHANNELS = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]


@pytest.fixture(scope="session")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repository")
    shutil.copytree(DEFAULT, root / "etth1-rsa" / "5")
    return root


@pytest.fixture(scope="session")
def service(repository: Path, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("service") / "service.log"
    env = {"RSA_MAX_SERIES_PER_REQUEST": "3", "RSA_MODEL_CONTROL": "explicit"}
    with live_service(repository, log, **env) as live:
        yield live


def etth1_long(n_series: int, seed: int = 0) -> pd.DataFrame:
    """`n_series` stretches of ETTh1 of different lengths and ends, as a long frame (unique_id, ds, the
    seven channels), rows shuffled: the client sorts them."""
    wide = pd.read_csv(ROOT / "data" / "ETT" / "ETTh1.csv", parse_dates=["date"])
    rng = np.random.default_rng(seed)
    parts = []
    for i in range(n_series):
        length = int(rng.integers(512, 700))
        end = int(rng.integers(length, len(wide)))
        part = wide.iloc[end - length : end].rename(columns={"date": "ds"})
        parts.append(part.assign(unique_id=f"s{i:02d}"))
    frame = pd.concat(parts, ignore_index=True)[["unique_id", "ds", *CHANNELS]]
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
