"""The parse process: large forecast bodies are parsed in a worker process and answered exactly as on
the event loop; small ones stay on the loop; what the fast lane declines gets the model's errors."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from app.core.offload import ParseProcess
from tests.app.conftest import make_settings, ort_forecast, running_client
from tests.app.core.loaded import loaded

L, C = 8, 3


def test_only_large_bodies_and_only_when_enabled() -> None:
    off = ParseProcess(0)
    assert not off.takes(10**9)
    off.stop()
    on = ParseProcess(1000)
    try:
        assert on.takes(1000) and not on.takes(999)
        asyncio.run(on.start())
        worker = asyncio.run(on.run(os.getpid))
        assert worker != os.getpid()  # really another process
        os.kill(worker, signal.SIGTERM)  # a stop signal to the group is the parent's to handle
        time.sleep(0.2)
        assert asyncio.run(on.run(os.getpid)) == worker
    finally:
        on.stop()


def test_the_worker_starts_with_the_parsers_imported() -> None:
    """The first big body must not pay for importing its parser in the worker (0.4 s of CPU in a flood)."""
    from app.protocols.oip_v2.codec import parse_infer
    from app.protocols.registry import REGISTRY
    from app.protocols.rsa_v1.wire import fast_forecast
    from app.protocols.timeseries.codec import parse_request

    assert {fast_forecast, parse_request, parse_infer} <= set(REGISTRY.parsers)  # the routes' lanes
    modules = tuple(lane.__module__ for lane in REGISTRY.parsers)
    cold, warm = ParseProcess(1000), ParseProcess(1000)
    try:
        asyncio.run(cold.start())
        asyncio.run(warm.start(modules))
        assert not any(asyncio.run(cold.run(loaded, m)) for m in modules)  # the test can fail
        assert all(asyncio.run(warm.run(loaded, m)) for m in modules)
    finally:
        cold.stop()
        warm.stop()


@pytest.mark.parametrize("min_bytes", [0, 4096])
def test_large_bodies_answer_the_same_through_the_worker(toy_repository: Path, min_bytes: int) -> None:
    x = np.random.default_rng(3).normal(0, 1, (64, L, C)).astype(np.float32)
    body = {"series": [{"id": f"s{i}", "values": w.tolist()} for i, w in enumerate(x)]}
    with running_client(make_settings(toy_repository, parse_process_min_bytes=min_bytes)) as client:
        worker = client.app.state.runtime.parse_process  # type: ignore[attr-defined]
        calls: list[int] = []
        run = worker.run

        async def counted(fn, raw):  # type: ignore[no-untyped-def]
            calls.append(len(raw))
            return await run(fn, raw)

        worker.run = counted
        r = client.post("/v1/models/toy/versions/1/forecast", json=body)
        assert r.status_code == 200, r.text
        got = np.array([f["forecast"] for f in r.json()["forecasts"]])
        np.testing.assert_allclose(
            got, ort_forecast(toy_repository / "toy" / "1" / "model.onnx", x), atol=1e-5
        )
        small = client.post("/v1/models/toy/versions/1/forecast", json={"series": body["series"][:1]})
        assert small.status_code == 200
        assert len(calls) == (1 if min_bytes else 0)  # the large body only, and only with a worker
        # A large body the fast lane declines (a bool where a number belongs): the model's own error.
        bad = {"series": [*body["series"][:-1], {"values": [[True, 1, 1]] * L}]}
        r = client.post("/v1/models/toy/versions/1/forecast", json=bad)
        assert r.status_code == 422 and r.json()["error"]["field"] == "series[63].values[0][0]", r.text
    if min_bytes:
        assert worker._pool is not None and not worker._pool._processes  # stopped with the app


def test_a_dead_worker_means_parsing_on_the_loop_not_failed_requests(toy_repository: Path) -> None:
    x = np.random.default_rng(4).normal(0, 1, (64, L, C)).astype(np.float32)
    body = {"series": [{"values": w.tolist()} for w in x]}
    with running_client(make_settings(toy_repository, parse_process_min_bytes=4096)) as client:
        worker = client.app.state.runtime.parse_process  # type: ignore[attr-defined]
        assert client.post("/v1/models/toy/versions/1/forecast", json=body).status_code == 200
        for pid in list(worker._pool._processes):
            os.kill(pid, signal.SIGKILL)
        for _ in range(2):  # the first meets the broken pool, the second finds it gone
            r = client.post("/v1/models/toy/versions/1/forecast", json=body)
            assert r.status_code == 200, r.text
        assert not worker.takes(10**9)
