"""A real service process for the protocol tests (the Triton clients need a listening server): the cycle
repository's models ("hourly": period 24; "plain": no cycle; tests/app/fakes.py; none has prediction
intervals) beside the shipped model's latest version ("etth1-rsa", calibrated intervals), HTTP and gRPC on
free loopback ports, and the `/v1` forecast every other protocol's numbers are compared with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest

from bench.loadgen import free_port
from tests.app.fakes import write_cycle_repository
from tests.app.live import LiveService, live_service

L, C, H = 8, 3, 4  # the fake models' input length, channels and horizon
SHIPPED = Path(__file__).resolve().parents[3] / "model_repository" / "etth1-rsa"


@dataclass
class Served:
    service: LiveService
    grpc_port: int

    @property
    def url(self) -> str:
        return self.service.url

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


def shipped_latest() -> Path:
    """The shipped model's latest version folder."""
    return max((p for p in SHIPPED.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


@pytest.fixture(scope="package")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("protocols")
    repository = write_cycle_repository(folder / "repository")
    latest = shipped_latest()  # not a fixed number: a later version of the shipped model serves here too
    (repository / SHIPPED.name).mkdir()
    (repository / SHIPPED.name / latest.name).symlink_to(latest, target_is_directory=True)
    grpc_port = free_port()
    with live_service(repository, folder / "service.log", RSA_GRPC_PORT=str(grpc_port)) as service:
        yield Served(service, grpc_port)


def windows(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 3, (n, L, C)).astype(np.float32)


def v1_answer(
    url: str, model: str, batch: np.ndarray, starts: list[datetime] | None = None, **extra: object
) -> dict[str, np.ndarray]:
    """The `/v1` answer for these windows: each array key (`forecast`, `lo-80`, ...) as float32 [n, h, C],
    the reference numbers; `extra` goes into the request (`level`, `horizon`)."""
    series = []
    for i, window in enumerate(batch):
        item: dict[str, object] = {"id": str(i), "values": window.tolist()}
        if starts is not None:
            item["start"] = starts[i].isoformat()
        series.append(item)
    r = httpx.post(f"{url}/v1/models/{model}/forecast", json={"series": series, **extra}, timeout=30)
    assert r.status_code == 200, r.text
    forecasts = r.json()["forecasts"]
    keys = [k for k, v in forecasts[0].items() if k not in ("channels", "timestamps") and isinstance(v, list)]
    return {k: np.array([f[k] for f in forecasts], np.float32) for k in keys}


def v1_forecast(url: str, model: str, batch: np.ndarray, starts: list[datetime] | None = None) -> np.ndarray:
    """The `/v1` forecast for these windows, as float32 [n, H, C]."""
    return v1_answer(url, model, batch, starts)["forecast"]


def shipped_windows(n: int, seed: int = 0) -> tuple[np.ndarray, list[datetime]]:
    """n windows of the shipped model's shape (read from its latest manifest) and their first rows' times,
    on the hour as its daily cycle steps."""
    manifest = json.loads((shipped_latest() / "manifest.json").read_text())
    shape = (n, manifest["input_length"], len(manifest["channels"]))
    batch = np.random.default_rng(seed).normal(5, 3, shape).astype(np.float32)
    starts = [datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=5 * i) for i in range(n)]
    return batch, starts
