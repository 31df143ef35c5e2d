"""The local engine's model repository: version policies, loading new versions beside the served ones,
unloading, failed versions reported without disturbing what serves, the index, polling, and the
metrics' series of what is gone. In process, on fake models (tests/app/fakes.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.artifacts.policy import POLICY_FILE, PolicyError, VersionPolicy, read_policy
from app.core.errors import LoadFailed, ModelNotFound, ModelNotReady, VersionNotFound
from app.engine.local import LocalEngine
from app.observability.metrics import EngineMetrics
from tests.app.conftest import make_settings
from tests.app.fakes import ToySpec, write_version

L, C = 8, 3


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


async def settled(engine: LocalEngine) -> None:
    for _ in range(1000):
        if not engine.catalog.loading_any:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("still loading")


def feed() -> dict[str, np.ndarray]:
    return {"window": np.random.default_rng(0).normal(0, 1, (1, L, C)).astype(np.float32)}


def test_policies() -> None:
    assert VersionPolicy(latest=2).select([1, 2, 3]) == {2, 3}
    assert VersionPolicy(all=True).select([1, 3]) == {1, 3}
    assert VersionPolicy(specific=(1, 4)).select([1, 2, 3]) == {1}
    for bad in ({}, {"latest": 1, "all": True}, {"latest": 0}, {"all": False}, {"every": True}):
        with pytest.raises(ValueError):
            VersionPolicy.model_validate(bad)


def test_policy_files(tmp_path: Path) -> None:
    assert read_policy(tmp_path) == VersionPolicy(all=True)  # no file: every version
    (tmp_path / POLICY_FILE).write_text('{"latest": 1}')
    assert read_policy(tmp_path).latest == 1
    (tmp_path / POLICY_FILE).write_text("{latest")
    with pytest.raises(PolicyError, match=POLICY_FILE):
        read_policy(tmp_path)


def test_a_policy_serves_only_the_versions_it_names(tmp_path: Path) -> None:
    for v in (1, 2, 3):
        write_version(tmp_path, ToySpec(version=v))
    (tmp_path / "toy" / POLICY_FILE).write_text('{"latest": 2}')

    async def scenario() -> None:
        engine = LocalEngine(make_settings(tmp_path))
        await engine.start()
        await settled(engine)
        assert sorted(engine.catalog.model("toy").versions) == [2, 3] and engine.catalog.ready
        index = {(e.version, e.state, e.reason) for e in await engine.index()}
        assert index == {
            (1, "UNAVAILABLE", "not selected by its version policy"),
            (2, "READY", ""),
            (3, "READY", ""),
        }
        assert [e.version for e in await engine.index(ready_only=True)] == [2, 3]
        await engine.stop()

    run(scenario)


def test_a_new_version_loads_beside_the_old_and_latest_moves_only_when_it_is_ready(tmp_path: Path) -> None:
    write_version(tmp_path, ToySpec(version=1))
    release = threading.Event()
    original = LocalEngine._open

    def slow_open(self: LocalEngine, ref: Any) -> Any:
        if ref.version == 2:
            assert release.wait(20)
        return original(self, ref)

    async def scenario() -> None:
        engine = LocalEngine(make_settings(tmp_path, model_control="explicit"))
        engine._open = slow_open.__get__(engine)  # type: ignore[method-assign]
        await engine.start()
        await settled(engine)
        assert engine.catalog.resolve("toy").version == 1
        write_version(tmp_path, ToySpec(version=2))
        loading = asyncio.ensure_future(engine.load("toy"))
        for _ in range(500):
            if 2 in engine.catalog.model("toy").versions:
                break
            await asyncio.sleep(0.01)
        assert engine.catalog.model("toy").versions[2].state == "loading"
        assert engine.catalog.resolve("toy").version == 1  # the old one serves meanwhile
        assert engine.catalog.ready  # a version loading beside a served one keeps the replica ready
        out = await engine.submit("toy", 1, feed(), 5.0)
        assert out.shape == (1, 4, C)
        release.set()
        await loading
        assert engine.catalog.resolve("toy").version == 2 and engine.catalog.ready
        await engine.stop()

    run(scenario)


def test_a_damaged_version_is_reported_and_the_served_one_keeps_serving(tmp_path: Path) -> None:
    write_version(tmp_path, ToySpec(version=1))

    async def scenario() -> None:
        engine = LocalEngine(make_settings(tmp_path, model_control="explicit"))
        await engine.start()
        await settled(engine)
        broken = write_version(tmp_path, ToySpec(version=2))
        (broken / "model.onnx").write_bytes(b"not onnx")
        with pytest.raises(LoadFailed, match="version 2: IntegrityError"):
            await engine.load("toy")
        entry = engine.catalog.model("toy").versions[2]
        assert entry.state == "failed" and not entry.required
        assert engine.catalog.resolve("toy").version == 1 and engine.catalog.ready  # undisturbed
        index = {e.version: e for e in await engine.index()}
        assert index[2].state == "UNAVAILABLE" and "the manifest says" in index[2].reason
        # mended, then loaded again: the failed version is tried again
        write_version(tmp_path, ToySpec(version=2))
        await engine.load("toy")
        assert engine.catalog.resolve("toy").version == 2
        await engine.stop()

    run(scenario)


def test_unloading_a_version_and_a_model_frees_them_and_forgets_their_metrics(tmp_path: Path) -> None:
    for v in (1, 2):
        write_version(tmp_path, ToySpec(version=v))
    write_version(tmp_path, ToySpec(name="other", version=1))

    async def scenario() -> None:
        metrics = EngineMetrics(256)
        engine = LocalEngine(
            make_settings(tmp_path, model_control="explicit"),
            hooks=metrics.hooks,
            collect=metrics.collect,
            forget=metrics.forget,
        )
        await engine.start()
        await settled(engine)
        for v in (1, 2):
            await engine.submit("toy", v, feed(), 5.0)
        model_1 = engine.get("toy", 1).model
        labels = {"model": "toy", "version": "1"}
        assert metrics.registry.get_sample_value("rsa_rows_total", labels) == 1
        (tmp_path / "toy" / POLICY_FILE).write_text('{"latest": 1}')
        await engine.load("toy")  # the policy now drops version 1
        assert sorted(engine.catalog.model("toy").versions) == [2]
        assert model_1 is not None and not model_1.loaded  # its sessions are gone
        assert metrics.registry.get_sample_value("rsa_rows_total", labels) is None  # and its series
        with pytest.raises(VersionNotFound, match="no version 1"):
            engine.catalog.resolve("toy", 1)
        await engine.unload("other")
        with pytest.raises(ModelNotFound):
            engine.catalog.resolve("other")
        with pytest.raises(ModelNotFound, match="not loaded"):
            await engine.unload("other")
        assert {(e.name, e.version, e.state) for e in await engine.index() if e.name == "other"} == {
            ("other", 1, "UNAVAILABLE")
        }
        await engine.load("other")  # and back
        assert engine.catalog.resolve("other").version == 1
        with pytest.raises(ModelNotFound, match="no folder"):
            await engine.load("nope")
        await engine.stop()

    run(scenario)


def test_an_unloading_version_finishes_what_reached_it(tmp_path: Path) -> None:
    for v in (1, 2):
        write_version(tmp_path, ToySpec(version=v))

    async def scenario() -> None:
        engine = LocalEngine(make_settings(tmp_path, model_control="explicit"))
        await engine.start()
        await settled(engine)
        batcher = engine.get("toy", 1).batcher
        assert batcher is not None
        gate = threading.Event()
        inner = batcher.run_fn
        batcher.inline_max_rows = 0
        batcher.run_fn = lambda f: (gate.wait(10), inner(f))[1]
        in_flight = asyncio.ensure_future(engine.submit("toy", 1, feed(), 10.0))
        await asyncio.sleep(0.05)
        (tmp_path / "toy" / POLICY_FILE).write_text('{"specific": [2]}')
        unloading = asyncio.ensure_future(engine.load("toy"))
        await asyncio.sleep(0.1)
        assert engine.catalog.model("toy").versions[1].state == "unloading"
        with pytest.raises(ModelNotReady, match="being unloaded"):
            engine.catalog.resolve("toy", 1)
        assert engine.catalog.resolve("toy").version == 2
        gate.set()
        assert (await in_flight).shape == (1, 4, C)  # answered, not lost
        await unloading
        assert 1 not in engine.catalog.model("toy").versions
        await engine.stop()

    run(scenario)


def test_polling_loads_published_versions_and_never_sees_a_half_written_one(tmp_path: Path) -> None:
    write_version(tmp_path, ToySpec(version=1))

    async def scenario() -> None:
        engine = LocalEngine(make_settings(tmp_path, model_control="poll", poll_s=0.05))
        seen: list[tuple[int, str]] = []
        engine.on_catalog(lambda c: seen.extend((v.version, v.state) for v in c.versions()))
        await engine.start()
        await settled(engine)
        # the exporter's way: everything written into a dot-folder, then one rename
        staging = tmp_path / "toy" / ".2-staging"
        built = write_version(tmp_path, ToySpec(version=2))
        shutil.move(str(built), staging)
        await asyncio.sleep(0.3)  # several scans of the half-published model
        assert 2 not in engine.catalog.model("toy").versions
        staging.rename(tmp_path / "toy" / "2")
        for _ in range(300):
            if engine.catalog.find_ready("toy", None) and engine.catalog.resolve("toy").version == 2:
                break
            await asyncio.sleep(0.02)
        assert engine.catalog.resolve("toy").version == 2
        assert (2, "failed") not in seen
        shutil.rmtree(tmp_path / "toy" / "1")  # a version removed from the folder is unloaded
        for _ in range(300):
            if 1 not in engine.catalog.model("toy").versions:
                break
            await asyncio.sleep(0.02)
        assert sorted(engine.catalog.model("toy").versions) == [2]
        manifest = json.loads((tmp_path / "toy" / "2" / "manifest.json").read_text())
        assert manifest["version"] == 2
        await engine.stop()

    run(scenario)
