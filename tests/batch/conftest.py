"""Long tables of ETTh1 stretches for the batch tests, and the shipped default model in a repository of
its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from tests.client.conftest import CHANNELS, DEFAULT, etth1_long

__all__ = ["CHANNELS", "etth1_table"]


def etth1_table(n_series: int, seed: int = 0, prefix: str = "s") -> pa.Table:
    frame = etth1_long(n_series, seed)
    frame["unique_id"] = prefix + frame["unique_id"]
    return pa.Table.from_pandas(frame, preserve_index=False)


@pytest.fixture(scope="session")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repository")
    shutil.copytree(DEFAULT, root / "etth1-rsa" / "5")
    return root
