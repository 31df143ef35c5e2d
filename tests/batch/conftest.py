"""Long tables of ETTh1 stretches for the batch tests, the shipped default model in a repository of its
own, and Ray's state kept out of the home folder and /tmp/ray."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
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


RAY_STATE = ("RAY_TMPDIR", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_USAGE_STATS_ENABLED")


@pytest.fixture(scope="session", autouse=True)
def ray_state() -> Iterator[Path]:
    """Every Ray these tests start (local `ray.init`, `ray start`, the jobs they run) keeps its sessions,
    logs and sockets in a folder of the tests' own, removed at the end, and authenticates with a token of
    their own from the environment: left to itself a local Ray writes ~/.ray/auth_token and
    /tmp/ray/session_*, and leaves them. Set before any Ray starts in this process (Ray's token loader
    keeps the first token it read)."""
    temp = Path(tempfile.mkdtemp(prefix="r37-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    saved = {k: os.environ.get(k) for k in RAY_STATE}
    # The token only: `ray.init` turns the mode on itself and refreshes its configuration, which the test
    # modules' `import ray` read before this ran (a mode set here left the driver's at 'disabled').
    os.environ.pop("RAY_AUTH_MODE", None)
    os.environ.update(RAY_TMPDIR=str(temp), RAY_AUTH_TOKEN=secrets.token_hex(32), RAY_USAGE_STATS_ENABLED="0")
    try:
        yield temp
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(temp, ignore_errors=True)
