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
from app.core.errors import (
    InvalidModelName,
    LoadFailed,
    ModelNotFound,
    ModelNotReady,
    TooManyVersions,
    VersionNotFound,
)
from app.engine.local import LocalEngine, RepositoryManager
from app.observability.metrics import EngineMetrics
from tests.app.conftest import make_settings
from tests.app.fakes import BlockedManifest, ToySpec, write_version
from tests.utils.batching import replace_run

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
    original = RepositoryManager._open

    def slow_open(self: RepositoryManager, ref: Any) -> Any:
        if ref.version == 2:
            assert release.wait(20)
        return original(self, ref)

    async def scenario() -> None:
        engine = LocalEngine(make_settings(tmp_path, model_control="explicit"))
        engine.repository._open = slow_open.__get__(engine.repository)  # type: ignore[method-assign]
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
            observer=metrics,
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
        inner = batcher.runner.run
        batcher.inline.max_rows = 0
        replace_run(batcher, lambda f: (gate.wait(10), inner(f))[1])
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


# -- issue 32: names, bounds, readiness, loads with a deadline --------------------------------------------

# Names a client may try (the probe's): each one plain folder name or refused, whatever the disk holds.
TRAVERSALS = [
    "..",
    ".",
    "../outside/evil",
    "../outside/none",
    "toy/.",
    "toy/./.",
    "toy/..",
    "a\\b",
    "..\\outside\\evil",
    "a\x00b",
    "",
    ".hidden",
    "x" * 300,
    "é" * 65,  # 130 bytes of UTF-8
]


def refusal(error: BaseException) -> str:
    return str(error)


def test_a_name_that_is_not_one_plain_folder_name_is_refused_the_same_way_whether_or_not_it_exists(
    tmp_path: Path,
) -> None:
    repository = tmp_path / "repo"
    write_version(repository, ToySpec(version=1))
    write_version(tmp_path / "outside", ToySpec(name="evil", version=1))  # a real model folder outside

    async def scenario() -> None:
        engine = LocalEngine(make_settings(repository, model_control="explicit"))
        await engine.start()
        await settled(engine)
        answers: dict[str, str] = {}
        for name in [*TRAVERSALS, str(tmp_path / "outside" / "evil"), str(tmp_path / "outside" / "none")]:
            for call in (engine.load, engine.unload):
                with pytest.raises(InvalidModelName) as refused:
                    await call(name)
                assert refused.value.field == "name"
                assert "a model name is one folder name of the model repository" in str(refused.value)
                answers[name] = refusal(refused.value)
        # the folder's existence changes nothing: an existing model folder outside and a missing one
        assert answers["../outside/evil"] == answers["../outside/none"]
        assert answers[str(tmp_path / "outside" / "evil")] == answers[str(tmp_path / "outside" / "none")]
        assert "300 bytes, over 128" in answers["x" * 300]  # a bound of its own, never ENAMETOOLONG
        assert list(engine.catalog.models) == ["toy"] and engine.catalog.ready
        assert {e.name for e in await engine.index()} == {"toy"}
        await engine.stop()

    run(scenario)


def test_a_symlink_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    write_version(repository, ToySpec(version=1))
    write_version(tmp_path / "outside", ToySpec(name="evil", version=1))
    (repository / "link").symlink_to(tmp_path / "outside" / "evil", target_is_directory=True)
    (repository / "inside").symlink_to(repository / "toy", target_is_directory=True)

    async def scenario() -> None:
        engine = LocalEngine(make_settings(repository, model_control="explicit", models=["toy"]))
        await engine.start()
        await settled(engine)
        with pytest.raises(InvalidModelName, match="resolves outside the model repository"):
            await engine.load("link")
        assert "link" not in engine.catalog.models and engine.catalog.ready
        await engine.load("inside")  # a link within the repository is the operator's alias: it counts
        assert engine.catalog.resolve("inside").version == 1
        await engine.stop()

    run(scenario)


def test_aliases_are_refused_and_a_repeat_load_is_the_same_model(tmp_path: Path) -> None:
    write_version(tmp_path, ToySpec(version=1))

    async def scenario() -> None:
        engine = LocalEngine(make_settings(tmp_path, model_control="explicit"))
        await engine.start()
        await settled(engine)
        model = engine.get("toy", 1).model
        for n in range(1, 21):  # the probe's 20 names of one model: toy/., toy/./., ...
            with pytest.raises(InvalidModelName, match="path separator"):
                await engine.load("toy" + "/." * n)
        for _ in range(20):
            await engine.load("toy")
        assert list(engine.catalog.models) == ["toy"]
        assert engine.get("toy", 1).model is model  # the same sessions, not a copy
        assert engine.repository._held() == 1
        await engine.stop()

    run(scenario)


def test_loads_beyond_the_bound_on_loaded_versions_are_refused_whole(tmp_path: Path) -> None:
    for v in (1, 2):
        write_version(tmp_path, ToySpec(version=v))
    for v in (1, 2):
        write_version(tmp_path, ToySpec(name="other", version=v))

    async def scenario() -> None:
        settings = make_settings(tmp_path, model_control="explicit", models=["toy"], max_loaded_versions=3)
        engine = LocalEngine(settings)
        await engine.start()
        await settled(engine)
        with pytest.raises(TooManyVersions, match="RSA_MAX_LOADED_VERSIONS") as refused:
            await engine.load("other")
        assert refused.value.limit == 3 and refused.value.field == "RSA_MAX_LOADED_VERSIONS"
        assert list(engine.catalog.models) == ["toy"] and engine.catalog.ready  # nothing half-listed
        await engine.unload("toy")
        await engine.load("other")
        assert sorted(engine.catalog.model("other").versions) == [1, 2]
        await engine.stop()

    run(scenario)


def test_a_start_up_repository_over_the_bound_serves_the_newest_and_says_why(tmp_path: Path) -> None:
    for v in (1, 2, 3):
        write_version(tmp_path, ToySpec(version=v))

    async def scenario() -> None:
        engine = LocalEngine(make_settings(tmp_path, max_loaded_versions=2))
        await engine.start()
        await settled(engine)
        assert sorted(engine.catalog.model("toy").versions) == [2, 3]
        assert not engine.catalog.ready  # the operator's repository does not fit: said, not hidden
        assert "RSA_MAX_LOADED_VERSIONS" in "; ".join(engine.catalog.readiness_errors())
        await engine.stop()

    run(scenario)


def test_a_failed_explicit_load_never_turns_the_replica_unready_and_leaves_nothing_half_listed(
    tmp_path: Path,
) -> None:
    write_version(tmp_path, ToySpec(version=1))
    (tmp_path / "empty").mkdir()  # a model folder without a version folder
    broken = write_version(tmp_path, ToySpec(name="broken", version=1))
    (broken / "model.onnx").write_bytes(b"not onnx")

    async def scenario() -> None:
        engine = LocalEngine(make_settings(tmp_path, model_control="explicit", models=["toy"]))
        await engine.start()
        await settled(engine)
        seen: list[bool] = []
        engine.on_catalog(lambda c: seen.append(c.ready))
        with pytest.raises(LoadFailed, match="has no version folder"):
            await engine.load("empty")
        with pytest.raises(LoadFailed, match="version 1: IntegrityError"):
            await engine.load("broken")
        assert all(seen), "the replica was unready on the way"
        assert list(engine.catalog.models) == ["toy"] and engine.catalog.ready
        index = {(e.name, e.version): e for e in await engine.index()}
        empty, broken_1 = index["empty", None], index["broken", 1]
        assert empty.state == "UNAVAILABLE" and "no version folder" in empty.reason
        assert broken_1.state == "UNAVAILABLE" and "the manifest says" in broken_1.reason
        write_version(tmp_path, ToySpec(name="broken", version=1))  # mended: loads, reasons gone
        await engine.load("broken")
        assert engine.catalog.resolve("broken").version == 1
        assert {e.reason for e in await engine.index() if e.name == "broken"} == {""}
        await engine.stop()

    run(scenario)


def test_a_blocked_manifest_read_leaves_other_loads_unloads_and_readiness_working(tmp_path: Path) -> None:
    write_version(tmp_path, ToySpec(version=1))
    write_version(tmp_path, ToySpec(name="other", version=1))
    stuck = write_version(tmp_path, ToySpec(name="stuck", version=1))

    async def scenario(blocked: BlockedManifest) -> None:
        engine = LocalEngine(make_settings(tmp_path, model_control="explicit", models=["toy"]))
        await engine.start()
        await settled(engine)
        loading = asyncio.ensure_future(engine.load("stuck"))
        for _ in range(1000):  # hang guard only
            if "stuck" in engine.catalog.models:
                break
            await asyncio.sleep(0.01)
        assert engine.catalog.model("stuck").versions[1].state == "loading"
        assert engine.catalog.ready  # readiness is not waiting for it
        await engine.load("other")  # another model loads meanwhile
        await engine.unload("toy")  # and unloads
        await engine.load("toy")
        assert {e.name for e in await engine.index()} == {"toy", "other", "stuck"}
        out = await engine.submit("toy", 1, feed(), 5.0)
        assert out.shape == (1, 4, C)
        assert not loading.done()
        await asyncio.to_thread(blocked.release)  # the read returns: the load completes
        await loading
        assert engine.catalog.resolve("stuck").version == 1 and engine.catalog.ready
        await engine.stop()

    with BlockedManifest(stuck) as blocked:
        run(lambda: scenario(blocked))


def test_a_load_past_its_deadline_fails_with_its_reason_and_is_freed_when_its_read_returns(
    tmp_path: Path,
) -> None:
    write_version(tmp_path, ToySpec(version=1))
    stuck = write_version(tmp_path, ToySpec(name="stuck", version=1))

    async def scenario(blocked: BlockedManifest) -> None:
        # the deadline is the verdict only for a read that never returns until released: no busy machine
        # makes it pass early
        settings = make_settings(tmp_path, model_control="explicit", models=["toy"], load_timeout_s=0.5)
        engine = LocalEngine(settings)
        await engine.start()
        await settled(engine)
        with pytest.raises(LoadFailed, match=r"LoadTimeout: not loaded within RSA_LOAD_TIMEOUT_S \(0.5 s\)"):
            await engine.load("stuck")
        assert "stuck" not in engine.catalog.models and engine.catalog.ready
        index = {(e.name, e.version): e for e in await engine.index()}
        assert "RSA_LOAD_TIMEOUT_S" in index["stuck", 1].reason
        assert engine.repository._load_threads.abandoned == 1  # the hung read counts against the bound
        assert engine.repository._held() == 2
        await asyncio.to_thread(blocked.release)
        for _ in range(2000):  # hang guard only: the late load returns, and is freed
            if engine.repository._load_threads.abandoned == 0:
                break
            await asyncio.sleep(0.01)
        assert engine.repository._load_threads.abandoned == 0 and engine.repository._held() == 1
        await engine.load("stuck")  # the folder reads now: it loads
        assert engine.catalog.resolve("stuck").version == 1
        await engine.stop()

    with BlockedManifest(stuck) as blocked:
        run(lambda: scenario(blocked))
