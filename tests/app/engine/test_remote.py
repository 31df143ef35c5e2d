"""The engine API over its socket, in one process: a LocalEngine behind EngineServer and a RemoteEngine
talking to it through ZeroMQ, against the same calls made in process (catalog, submit, inspect,
admission, errors, metrics, the repository), and what the front end does when the engine stops answering
or closes its socket."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.core.errors import ModelNotFound, ModelNotReady, Overloaded, VersionNotFound
from app.engine.client import LOCAL_ADMIT_ROWS, RemoteEngine
from app.engine.local import LocalEngine
from app.engine.server import EngineServer
from app.observability.metrics import EngineMetrics
from tests.app.conftest import make_settings

L, C = 8, 3


def pair(
    repository: Path,
    tmp_path: Path,
    test: Callable[[LocalEngine, RemoteEngine], Awaitable[None]],
    servers: list[EngineServer] | None = None,
    **settings_overrides: Any,
) -> None:
    async def scenario() -> None:
        settings = make_settings(repository, model_control="explicit", **settings_overrides)
        metrics = EngineMetrics(256)
        local = LocalEngine(settings, observer=metrics)
        server = EngineServer(local, f"ipc://{tmp_path}/engine.sock")
        if servers is not None:
            servers.append(server)
        await server.start()
        await local.start()
        remote = RemoteEngine(f"ipc://{tmp_path}/engine.sock", settings)
        await remote.start()
        try:
            for _ in range(500):
                if remote.catalog.ready:
                    break
                await asyncio.sleep(0.01)
            await test(local, remote)
        finally:
            await remote.stop(0)
            await local.stop()
            await server.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def feed(rows: int) -> dict[str, np.ndarray]:
    return {"window": np.random.default_rng(rows).normal(0, 1, (rows, L, C)).astype(np.float32)}


def test_the_remote_engine_answers_as_the_local_one(toy_repository: Path, tmp_path: Path) -> None:
    async def test(local: LocalEngine, remote: RemoteEngine) -> None:
        assert remote.catalog.to_wire() == local.catalog.to_wire()
        x = feed(5)
        np.testing.assert_array_equal(
            await remote.submit("toy", 2, x, 5.0), await local.submit("toy", 2, x, 5.0)
        )
        there, here = await remote.inspect("toy", 1, feed(1)), await local.inspect("toy", 1, feed(1))
        for a, b in zip(
            (there.forecast, there.softmax, there.rem, there.mixed),
            (here.forecast, here.softmax, here.rem, here.mixed),
            strict=True,
        ):
            np.testing.assert_array_equal(a, b)
        assert await remote.stats("toy", 2) == await local.stats("toy", 2)
        with pytest.raises(VersionNotFound, match="no version 9") as raised:
            await remote.submit("toy", 9, x, 5.0)
        assert raised.value.field == "version"  # the domain error as raised, field included
        families = {f.name: f.type for f in await remote.metric_families()}
        assert families["rsa_model"] == "info" and families["rsa_rows"] == "counter"

    pair(toy_repository, tmp_path, test)


def test_admission_small_here_big_in_the_engine(toy_repository: Path, tmp_path: Path) -> None:
    async def test(local: LocalEngine, remote: RemoteEngine) -> None:
        batcher = local.get("toy", 2).batcher
        assert batcher is not None
        # big: the engine reserves the rows, and they count there until released
        reservation = await remote.admit("toy", 2, LOCAL_ADMIT_ROWS + 10, 5.0)
        assert reservation is not None and batcher.ahead_rows == LOCAL_ADMIT_ROWS + 10
        remote.release(reservation)
        for _ in range(100):
            if batcher.ahead_rows == 0:
                break
            await asyncio.sleep(0.01)
        assert batcher.ahead_rows == 0
        # small: judged here on the backlog the engine last reported, which ages as it drains
        assert await remote.admit("toy", 2, 1, 1.0) is None
        remote._backlog[("toy", 2)] = (10_000, 0.001, time.perf_counter())  # 10 s of work just reported
        with pytest.raises(Overloaded):
            await remote.admit("toy", 2, 1, 1.0)
        remote._backlog[("toy", 2)] = (10_000, 0.001, time.perf_counter() - 20)  # reported 20 s ago
        assert await remote.admit("toy", 2, 1, 1.0) is None
        await remote.submit("toy", 2, feed(1), 5.0)  # an answer reports the backlog afresh
        assert remote._backlog[("toy", 2)][0] == 0
        # big: refused here too when the last report alone rules it out, without asking the engine
        remote._backlog[("toy", 2)] = (10_000, 0.001, time.perf_counter())
        with pytest.raises(Overloaded):
            await remote.admit("toy", 2, LOCAL_ADMIT_ROWS + 10, 1.0)
        assert batcher.stats.rejected_items == 0  # the engine was not asked
        # the engine's refusal brings its backlog with it, as its admissions do
        remote._backlog.clear()
        local_reservation = await local.admit("toy", 2, 10_000, 100.0)  # work ahead in the engine
        batcher.row_seconds = 0.001
        with pytest.raises(Overloaded):
            await remote.admit("toy", 2, LOCAL_ADMIT_ROWS + 10, 1.0)
        assert batcher.stats.rejected_items == 1 and remote._backlog[("toy", 2)][0] == 10_000
        assert local_reservation is not None
        local.release(local_reservation)

    pair(toy_repository, tmp_path, test)


def test_the_repository_api_over_the_socket(toy_repository: Path, tmp_path: Path) -> None:
    async def test(local: LocalEngine, remote: RemoteEngine) -> None:
        assert [(e.name, e.version, e.state) for e in await remote.index()] == [
            ("toy", 1, "READY"),
            ("toy", 2, "READY"),
        ]
        await remote.unload("toy")
        for _ in range(100):  # the catalog is pushed: the front end sees the model go
            if "toy" not in remote.catalog.models:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(ModelNotFound):
            remote.catalog.resolve("toy")
        await remote.load("toy")
        for _ in range(100):
            if remote.catalog.find_ready("toy", None):
                break
            await asyncio.sleep(0.01)
        assert remote.catalog.resolve("toy").version == 2

    pair(toy_repository, tmp_path, test)


# A fast heartbeat for the tests below; the bounds they wait with are many times longer.
HEARTBEAT = {"engine_heartbeat_s": 0.05, "engine_heartbeat_timeout_s": 0.4}
GUARD_S = 10.0


async def _until(predicate: Callable[[], bool]) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < GUARD_S
        await asyncio.sleep(0.01)
    return time.monotonic() - started


def test_an_engine_that_stops_answering_is_unavailable_until_it_answers_again(
    toy_repository: Path, tmp_path: Path
) -> None:
    servers: list[EngineServer] = []

    async def test(local: LocalEngine, remote: RemoteEngine) -> None:
        channel = servers[0]._channel
        assert channel is not None and remote.catalog.ready and remote.unavailable is None
        answer = channel._on_message
        channel._on_message = lambda frames: None  # its event loop stuck, as far as the socket shows
        waiting = asyncio.ensure_future(remote.index())
        with pytest.raises(ModelNotReady, match="has not answered") as raised:
            await asyncio.wait_for(waiting, GUARD_S)
        assert raised.value.retry_after_s == 1
        assert not remote.catalog.ready and "has not answered" in (remote.catalog.error or "")
        assert remote.catalog.models.keys() == {"toy"}  # what the front end knew
        with pytest.raises(ModelNotReady):  # new calls: refused at once
            await asyncio.wait_for(remote.submit("toy", 2, feed(1), 5.0), 0.05)
        assert await remote.stats("toy", 2) is None  # metadata answers without the counters
        assert [f.name for f in await remote.metric_families()] == ["rsa_engine_up"]
        channel._on_message = answer
        await _until(lambda: remote.unavailable is None)
        assert remote.catalog.ready
        assert (await remote.submit("toy", 2, feed(1), 5.0)).shape[0] == 1
        assert "rsa_engine_up" in {f.name for f in await remote.metric_families()}

    pair(toy_repository, tmp_path, test, servers, **HEARTBEAT)


def test_an_engine_whose_socket_closes_fails_the_calls_in_flight_at_once(
    toy_repository: Path, tmp_path: Path
) -> None:
    servers: list[EngineServer] = []

    async def test(local: LocalEngine, remote: RemoteEngine) -> None:
        channel = servers[0]._channel
        assert channel is not None
        channel._on_message = lambda frames: None
        waiting = asyncio.ensure_future(remote.index())
        await asyncio.sleep(0.05)
        channel.close()  # as the kernel does for a process killed with SIGKILL
        started = time.monotonic()
        with pytest.raises(ModelNotReady, match="closed its socket"):
            await asyncio.wait_for(waiting, GUARD_S)
        print(f"socket closed: the call failed after {time.monotonic() - started:.3f}s")
        assert "closed its socket" in (remote.catalog.error or "")

    pair(toy_repository, tmp_path, test, servers, engine_heartbeat_s=60.0, engine_heartbeat_timeout_s=60.0)
