"""A real service process for the protocol tests (the Triton clients need a listening server): the cycle
repository's models ("hourly": period 24; "plain": no cycle; tests/app/fakes.py), HTTP and gRPC on free
loopback ports, and the `/v1` forecast every other protocol's numbers are compared with."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import numpy as np
import pytest

from bench.loadgen import free_port
from tests.app.live import LiveService, live_service

L, C, H = 8, 3, 4  # the fake models' input length, channels and horizon


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


@pytest.fixture(scope="package")
def served(cycle_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    grpc_port = free_port()
    log = tmp_path_factory.mktemp("protocols") / "service.log"
    with live_service(cycle_repository, log, RSA_GRPC_PORT=str(grpc_port)) as service:
        yield Served(service, grpc_port)


def windows(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 3, (n, L, C)).astype(np.float32)


def v1_forecast(url: str, model: str, batch: np.ndarray, starts: list[datetime] | None = None) -> np.ndarray:
    """The `/v1` answer for these windows, as float32 [n, H, C]: the reference numbers."""
    series = []
    for i, window in enumerate(batch):
        item: dict[str, object] = {"id": str(i), "values": window.tolist()}
        if starts is not None:
            item["start"] = starts[i].isoformat()
        series.append(item)
    r = httpx.post(f"{url}/v1/models/{model}/forecast", json={"series": series}, timeout=30)
    assert r.status_code == 200, r.text
    return np.array([f["forecast"] for f in r.json()["forecasts"]], np.float32)
