"""The CUDA runners: the bound runner (device buffers per bucket, pinned host staging, padding) and the
graph runner (a CUDA graph per bucket) answer bit for bit as the plain CUDA session, every shipped version;
the staging is pinned in one registration that leaves no CUDA error behind; a graph runner answers from
any calling thread (its own thread makes the calls); a capture succeeds while another version serves; a
real CUDA out-of-memory on the bound runner is retried in halves or answered 503, never a 500."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.artifacts.manifest import load_manifest
from app.core.errors import DeviceOutOfMemory
from app.engine.model import OnnxModel
from app.engine.providers import CUDA, RuntimeOptions
from app.engine.runners import BoundRunner, PlainRunner, create_runner, default_buckets
from app.engine.session import create_session
from tests.gpu.conftest import SHIPPED, real_windows

ROWS = (1, 2, 3, 7, 8, 64, 200, 256)
CUDA_OPTIONS = RuntimeOptions(device="cuda")


@pytest.mark.parametrize("graphs", [False, True], ids=["bound", "graph"])
@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: f"v{p.name}")
def test_bound_and_graph_runners_answer_as_the_plain_session(folder: Path, graphs: bool) -> None:
    manifest = load_manifest(folder / "manifest.json")
    path = folder / "model.onnx"
    plain = PlainRunner(create_session(path, CUDA_OPTIONS))
    runner = BoundRunner(
        create_session(path, CUDA_OPTIONS, graphs=graphs),
        manifest,
        default_buckets(256),
        device="cuda",
        graphs=graphs,
    )
    assert runner.provider == CUDA and runner._block is not None and runner._block.pinned
    assert runner._cudart is not None and runner._cudart.get_last_error() == 0  # nothing left behind
    assert runner.policy.inline is False
    runner.warmup(real_windows(manifest, 1))
    big = real_windows(manifest, 256, seed=7)
    for rows in ROWS:
        feed = real_windows(manifest, rows, seed=rows)
        np.testing.assert_array_equal(runner.run(feed), plain.run(feed), err_msg=f"{rows} rows")
        runner.run(big)  # the next smaller call must not see these rows
    runner.close()


def test_the_service_loads_the_bound_runner_with_graphs_when_asked(tmp_path: Path) -> None:
    folder = SHIPPED[-1]
    manifest = load_manifest(folder / "manifest.json")
    model = OnnxModel(folder, manifest, RuntimeOptions(device="cuda", cuda_graphs=True), max_rows=64)
    model.load()
    model.warmup()
    runner = model.runner
    assert isinstance(runner, BoundRunner) and runner.graphs, "CUDA graphs fell back (see the log)"
    assert runner.buckets == default_buckets(64) and model.policy.max_calls == 1
    plain = OnnxModel(folder, manifest, RuntimeOptions(device="cuda", cuda_io_binding=False))
    plain.load()
    assert isinstance(plain.runner, PlainRunner) and plain.provider == CUDA
    feed = real_windows(manifest, 5)
    np.testing.assert_array_equal(model.run_forecast(feed), plain.run_forecast(feed))


def _bound(folder: Path, graphs: bool, buckets: tuple[int, ...] = (1, 8, 64)) -> BoundRunner:
    manifest = load_manifest(folder / "manifest.json")
    path = folder / "model.onnx"
    return BoundRunner(
        create_session(path, CUDA_OPTIONS, graphs=graphs),
        manifest,
        buckets,
        device="cuda",
        graphs=graphs,
        rebuild=(lambda: create_session(path, CUDA_OPTIONS)) if graphs else None,
    )


def test_a_graph_runner_answers_from_any_thread_on_its_own() -> None:
    """ONNX Runtime keeps graphs per thread: calls from the main thread and from two pool threads
    alternately all run on the runner's thread, replaying the graphs captured there, bit for bit."""
    folder = SHIPPED[-1]
    manifest = load_manifest(folder / "manifest.json")
    runner = _bound(folder, graphs=True)
    runner.warmup(real_windows(manifest, 1))
    assert runner.graphs, "the capture fell back (see the log)"
    plain = PlainRunner(create_session(folder / "model.onnx", CUDA_OPTIONS))
    feeds = [real_windows(manifest, n, seed=n) for n in (1, 5, 8, 1, 40, 64, 2)]
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(runner.run, feeds)) + [runner.run(f) for f in feeds]
    for feed, got in zip(feeds * 2, answers, strict=True):
        np.testing.assert_array_equal(got, plain.run(feed))
    runner.close()


def test_a_capture_succeeds_while_another_version_serves() -> None:
    """The capture gate: a thread hammering another version's bound runner (copies, syncs) does not break
    the capture, and none of its calls fails."""
    busy_folder, graph_folder = SHIPPED[0], SHIPPED[-1]
    busy_manifest = load_manifest(busy_folder / "manifest.json")
    busy = _bound(busy_folder, graphs=False, buckets=(1,))
    busy.warmup(real_windows(busy_manifest, 1))
    stop, errors, calls = threading.Event(), [], [0]

    def hammer() -> None:
        feed = real_windows(busy_manifest, 1)
        while not stop.is_set():
            try:
                busy.run(feed)
                calls[0] += 1
            except Exception as exc:  # recorded: the assertion says what failed
                errors.append(f"{type(exc).__name__}: {exc}")

    worker = threading.Thread(target=hammer)
    worker.start()
    try:
        graph_manifest = load_manifest(graph_folder / "manifest.json")
        runner = _bound(graph_folder, graphs=True, buckets=default_buckets(256))
        runner.warmup(real_windows(graph_manifest, 1))
    finally:
        stop.set()
        worker.join()
    assert runner.graphs, "the capture fell back while another version served (see the log)"
    assert not errors and calls[0] > 0, errors[:3]


def test_a_real_out_of_memory_is_retried_in_halves_or_503_never_500() -> None:
    """Under small gpu_mem_limits, a 256-row call on the bound runner either answers (retried in halves)
    or raises DeviceOutOfMemory: run_with_iobinding's plain RuntimeError classified."""
    folder = SHIPPED[-1]
    manifest = load_manifest(folder / "manifest.json")
    big = real_windows(manifest, 256, seed=5)
    outcomes: dict[int, str] = {}
    for mib in (16, 32, 64, 128, 384):
        options = replace(CUDA_OPTIONS, gpu_mem_limit_bytes=mib << 20)
        try:
            runner = create_runner(folder / "model.onnx", manifest, options, 256)
            runner.warmup(real_windows(manifest, 1))
        except Exception:
            continue  # too small to load at all: not what this checks
        retries: list[str] = []
        runner.on_retry = retries.append
        try:
            runner.run(big)
            outcomes[mib] = "answered after halves" if retries else "answered"
        except DeviceOutOfMemory:
            outcomes[mib] = "503 device_out_of_memory"
        runner.close()
    print(f"\nout-of-memory outcomes by gpu_mem_limit (MiB): {outcomes}")
    assert outcomes, "no limit let the version load"
