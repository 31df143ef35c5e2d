"""The CUDA runners: the bound runner (device buffers per bucket, pinned host staging, padding) and the
graph runner (a CUDA graph per bucket) answer as the plain CUDA session within the exporter's bound, every
shipped version, and nothing of a bigger call leaks into a smaller one. Not bit for bit: cuBLAS picks its
kernels by shape, and a bucket pads the rows (H200, 2026-12-04: 1.9e-6 raw for v1-v3 at 3 rows in a
bucket of 4, 3.7e-5 for v4-v5; equal where the bucket is the call's own size);
the staging is pinned in one registration that leaves no CUDA error behind; a graph runner answers from
any calling thread (its own thread makes the calls); a capture succeeds while another version serves; a
real CUDA out-of-memory fails the bound runner's load as out_of_memory, and the plain runner's call is
retried in halves or answered 503, never a 500."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.artifacts.manifest import load_manifest
from app.core.errors import DeviceOutOfMemory
from app.engine.faults import classify_fault
from app.engine.model import OnnxModel
from app.engine.providers import CUDA, RuntimeOptions
from app.engine.runners import BoundRunner, PlainRunner, create_runner, default_buckets
from app.engine.session import create_session
from tests.gpu.conftest import SHIPPED, channel_std, real_windows
from tests.gpu.test_parity import TOLERANCE

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
    assert runner.provider == CUDA and runner._block is not None and runner._block.pinned, runner._block
    assert runner._cudart is not None and runner._cudart.get_last_error() == 0  # nothing left behind
    assert runner.policy.inline is False
    runner.warmup(real_windows(manifest, 1))
    big = real_windows(manifest, 256, seed=7)
    std, worst, same_shape = channel_std(), 0.0, []
    for rows in ROWS:
        feed = real_windows(manifest, rows, seed=rows)
        got = runner.run(feed)
        worst = max(worst, float(np.max(np.abs(got - plain.run(feed)) / std)))
        bucket = runner.bucket_for(rows)
        padded = {
            k: np.concatenate([a, np.zeros((bucket - rows, *a.shape[1:]), a.dtype)]) for k, a in feed.items()
        }
        same_shape.append(bool(np.array_equal(got, plain.run(padded)[:rows])))
        runner.run(big)  # the next smaller call must not see these rows
    runner.close()
    print(
        f"\nv{folder.name} {'graph' if graphs else 'bound'}: max |runner - plain| = {worst:.2e} std; "
        f"bit for bit against the plain session at the bucket's shape: {sum(same_shape)}/{len(ROWS)}"
    )
    assert worst <= TOLERANCE


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
    alternately all run on the runner's thread, replaying the graphs captured there: each answer within
    the bound of the plain session's, and the same bits on every replay."""
    folder = SHIPPED[-1]
    manifest = load_manifest(folder / "manifest.json")
    runner = _bound(folder, graphs=True)
    runner.warmup(real_windows(manifest, 1))
    assert runner.graphs, "the capture fell back (see the log)"
    plain = PlainRunner(create_session(folder / "model.onnx", CUDA_OPTIONS))
    feeds = [real_windows(manifest, n, seed=n) for n in (1, 5, 8, 1, 40, 64, 2)]
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(runner.run, feeds)) + [runner.run(f) for f in feeds]
    for feed, got in zip(feeds * 2, answers, strict=True):  # each answer its own feed's (no mix-up)
        assert float(np.max(np.abs(got - plain.run(feed)) / channel_std())) <= TOLERANCE
    for feed, got in zip(feeds, answers[len(feeds) :], strict=True):  # a replay: the same bits every time
        np.testing.assert_array_equal(got, runner.run(feed))
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


def test_a_real_out_of_memory_fails_the_load_or_is_retried_in_halves_or_503_never_500() -> None:
    """Under small gpu_mem_limits. The bound runner warms every bucket at load, so a limit too small for
    its largest bucket fails the load with an out-of-memory fault (run_with_iobinding's plain RuntimeError,
    classified), never a request; on the H200 (2026-12-04) v5 did not load at 16-384 MiB. The plain CUDA
    runner (RSA_CUDA_IO_BINDING=false) warms one row, so a 256-row call under a small limit is retried in
    halves or answered 503 device_out_of_memory, never a 500."""
    folder = SHIPPED[-1]
    manifest = load_manifest(folder / "manifest.json")
    path = folder / "model.onnx"
    big = real_windows(manifest, 256, seed=5)
    loads: dict[int, str] = {}
    calls: dict[int, str] = {}
    for mib in (16, 64, 256, 1024, 4096):
        options = replace(CUDA_OPTIONS, gpu_mem_limit_bytes=mib << 20)
        try:
            runner = create_runner(path, manifest, replace(options, cuda_io_binding=True), 256)
            assert isinstance(runner, BoundRunner)
            runner.warmup(real_windows(manifest, 1))
            loads[mib] = "loaded"
            runner.close()
        except Exception as exc:
            loads[mib] = classify_fault(exc) or f"{type(exc).__name__}: {str(exc)[:300]}"
        try:
            runner = create_runner(path, manifest, replace(options, cuda_io_binding=False), 256)
            runner.warmup(real_windows(manifest, 1))
        except Exception as exc:
            calls[mib] = f"no load: {classify_fault(exc) or type(exc).__name__ + ': ' + str(exc)[:300]}"
            continue
        retries: list[str] = []
        runner.on_retry = retries.append
        try:
            runner.run(big)
            calls[mib] = "answered after halves" if retries else "answered"
        except DeviceOutOfMemory:
            calls[mib] = "503 device_out_of_memory"
        runner.close()
    print(f"\nbound runner's load by gpu_mem_limit (MiB): {loads}\nplain runner's 256-row call: {calls}")
    assert set(loads.values()) <= {"loaded", "out_of_memory"} and "loaded" in loads.values(), loads
    assert "out_of_memory" in loads.values(), loads
    assert {"answered after halves", "503 device_out_of_memory"} & set(calls.values()), calls
