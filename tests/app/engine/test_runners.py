"""Runners: the bound (IOBinding, bucketed) runner the CUDA provider uses, run here on the CPU device, answers
bit for bit as the plain session; device faults raised with ONNX Runtime's own error types are retried
in halves (out of memory) or become 503-class domain errors."""

from __future__ import annotations

import ctypes
import gc
import itertools
import logging
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

from app.artifacts.manifest import Manifest, load_manifest
from app.core.errors import DeviceError, DeviceOutOfMemory
from app.engine.batching import Feed
from app.engine.cuda import PAGE, PinnedBlock
from app.engine.faults import BindingError, classify_fault
from app.engine.model import OnnxModel
from app.engine.providers import CPU, RuntimeOptions
from app.engine.runners import (
    GRAPH_ID_KEY,
    GRAPH_ID_SKIP,
    GRAPH_RUNS_PER_ID,
    BoundRunner,
    CpuRunner,
    PlainRunner,
    Runner,
    create_runner,
    default_buckets,
)
from app.engine.session import create_session

REPO = Path(__file__).resolve().parents[3]
SHIPPED = sorted((REPO / "model_repository" / "etth1-rsa").iterdir())
ONE_THREAD = RuntimeOptions(device="cpu", intra_op_threads=1)


def _feed(
    manifest: Manifest, rows: int, rng: np.random.Generator, scale: float = 5.0
) -> dict[str, np.ndarray]:
    x = rng.standard_normal((rows, manifest.input_length, manifest.n_channels)) * scale + 10
    feed = {"window": x.astype(np.float32)}
    if manifest.cycle is not None:
        feed["phase"] = rng.integers(0, manifest.cycle.period, rows).astype(np.int64)
    return feed


def _bound(folder: Path, buckets: tuple[int, ...]) -> tuple[BoundRunner, Manifest]:
    manifest = load_manifest(folder / "manifest.json")
    session = create_session(folder / "model.onnx", ONE_THREAD)
    return BoundRunner(session, manifest, buckets, device="cpu"), manifest


def test_default_buckets() -> None:
    assert default_buckets(1) == (1,)
    assert default_buckets(256) == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert default_buckets(100) == (1, 2, 4, 8, 16, 32, 64, 100)


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: f"v{p.name}")
def test_bound_runner_answers_bit_for_bit_as_the_plain_session(folder: Path) -> None:
    """Every shipped version, at bucket sizes and between them (padded), and beyond the largest bucket."""
    runner, manifest = _bound(folder, default_buckets(16))
    plain = create_session(folder / "model.onnx", ONE_THREAD)
    rng = np.random.default_rng(int(folder.name))
    for rows in (1, 2, 3, 5, 8, 13, 16, 21):
        feed = _feed(manifest, rows, rng)
        got = runner.run(feed)
        assert got.shape == (rows, manifest.horizon, manifest.n_channels)
        np.testing.assert_array_equal(got, plain.run(["forecast"], feed)[0], err_msg=f"{rows} rows")


def test_padding_never_leaks_into_an_answer(toy_repository: Path) -> None:
    """A bucket's rows left over from a bigger call are zeroed before a smaller one reuses it, and the
    answer is a copy: the next call cannot change it."""
    runner, manifest = _bound(toy_repository / "toy" / "1", (4,))
    plain = create_session(toy_repository / "toy" / "1" / "model.onnx", ONE_THREAD)
    rng = np.random.default_rng(0)
    big = _feed(manifest, 4, rng, scale=1e6)
    runner.run(big)
    small = _feed(manifest, 1, rng)
    first = runner.run(small)
    slot = runner._slots[0]
    assert not slot.host["window"][1:].any()  # the rows of the 4-row call are gone
    np.testing.assert_array_equal(first, plain.run(["forecast"], small)[0])
    kept = first.copy()
    runner.run(big)
    np.testing.assert_array_equal(first, kept)


def test_bound_runner_checks_its_settings(toy_repository: Path) -> None:
    folder = toy_repository / "toy" / "1"
    manifest = load_manifest(folder / "manifest.json")
    session = create_session(folder / "model.onnx", ONE_THREAD)
    with pytest.raises(ValueError, match="CUDA graphs need the CUDA device"):
        BoundRunner(session, manifest, (1, 2), device="cpu", graphs=True)
    with pytest.raises(ValueError, match="positive row counts"):
        BoundRunner(session, manifest, (0, 2), device="cpu")
    runner = BoundRunner(session, manifest, (8, 2, 2), device="cpu")
    assert runner.buckets == (2, 8)
    assert [runner.bucket_for(n) for n in (1, 2, 3, 8, 9)] == [2, 2, 8, 8, 8]


def test_the_cpu_provider_gets_the_cpu_runner(toy_repository: Path) -> None:
    folder = toy_repository / "toy" / "1"
    manifest = load_manifest(folder / "manifest.json")
    runner = create_runner(
        folder / "model.onnx",
        manifest,
        RuntimeOptions(device="auto", intra_op_threads=2, single_thread_max_rows=64),
        256,
    )
    assert isinstance(runner, CpuRunner) and runner.provider == CPU
    assert (runner.policy.max_calls, runner.policy.concurrent_max_rows) == (2, 64)
    single = create_runner(folder / "model.onnx", manifest, ONE_THREAD, 256)
    assert (single.policy.max_calls, single.policy.concurrent_max_rows) == (1, 0)


# -- device faults ----------------------------------------------------------------------------------

CUDA_OOM = "CUDA failure 2: out of memory ; GPU=0 ; hostname=h ; expr=cudaMalloc(&p, size);"
ARENA_OOM = "Failed to allocate memory for requested buffer of size 1073741824"
# The arena at its gpu_mem_limit, as the H200 wrote it (2026-12-04): no "out of memory" in it.
ARENA_LIMIT = (
    "Non-zero status code returned while running Sub node. Name:'node_sub' Status Message: "
    "/onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:360 void* "
    "onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*) Available memory of "
    "2699008 is smaller than requested bytes of 3670016"
)
CUBLAS = "CUBLAS failure 13: CUBLAS_STATUS_EXECUTION_FAILED ; GPU=0"


@pytest.mark.parametrize(
    ("exc", "fault"),
    [
        (
            ort_errors.RuntimeException(f"[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : {CUDA_OOM}"),
            "out_of_memory",
        ),
        (ort_errors.Fail(f"[ONNXRuntimeError] : 1 : FAIL : {ARENA_OOM}"), "out_of_memory"),
        (ort_errors.Fail(f"[ONNXRuntimeError] : 1 : FAIL : {ARENA_LIMIT}"), "out_of_memory"),
        (BindingError(f"Error in execution: {ARENA_LIMIT}"), "out_of_memory"),
        (ort_errors.RuntimeException("CUBLAS_STATUS_ALLOC_FAILED"), "out_of_memory"),
        (ort_errors.EPFail(CUBLAS), "device"),
        (ort_errors.RuntimeException(CUBLAS), "device"),
        (ort_errors.DeviceReset("the device was reset"), "device"),
        (ort_errors.EPFail("EP failure"), "device"),
        (ort_errors.InvalidArgument("Got invalid dimensions for input: window"), None),
        (ort_errors.Fail("Non-zero status code returned while running Reshape node"), None),
        # A RuntimeError that did not come out of one of ONNX Runtime's binding calls (our code, torch's
        # wording): never the device's, whatever it says.
        (RuntimeError("CUDA out of memory"), None),
        (RuntimeError(f"Error in execution: {CUDA_OOM}"), None),
        # The binding's own (run_with_iobinding, update_inplace; BindingError): by their text, strictly.
        (BindingError(f"Error in execution: {CUDA_OOM}"), "out_of_memory"),
        (BindingError(f"Error in execution: {ARENA_OOM}"), "out_of_memory"),
        (BindingError(f"Error in execution: {CUBLAS}"), "device"),
        (BindingError("CUDA failure 700: an illegal memory access was encountered ; GPU=0"), "device"),
        (BindingError("CUDA error cudaErrorLaunchFailure: unspecified launch failure"), "device"),
        (BindingError("Error in execution: Got invalid dimensions for input: window"), None),
        (
            BindingError("Error in execution: input 'window' is bound on device cpu, the graph wants cuda"),
            None,
        ),
    ],
)
def test_faults_are_classified_from_onnx_runtimes_own_errors(exc: Exception, fault: str | None) -> None:
    assert classify_fault(exc) == fault


class FaultyRunner(Runner):
    """A runner whose session raises ONNX Runtime's error for calls of more than `fits` rows."""

    provider = "CUDAExecutionProvider"

    def __init__(self, fits: int, error: Exception) -> None:
        self.fits, self.error, self.calls, self.retries = fits, error, [], []
        self.on_retry = self.retries.append

    def _call(self, feed: Feed, alone: bool) -> np.ndarray:
        rows = len(feed["window"])
        self.calls.append(rows)
        if rows > self.fits:
            raise self.error
        return feed["window"][:, :2, :] * 2


def _rows(n: int) -> dict[str, np.ndarray]:
    return {"window": np.arange(n * 4 * 3, dtype=np.float32).reshape(n, 4, 3)}


def test_out_of_memory_is_retried_once_in_halves() -> None:
    runner = FaultyRunner(fits=4, error=ort_errors.RuntimeException(CUDA_OOM))
    feed = _rows(7)
    np.testing.assert_array_equal(runner.run(feed), feed["window"][:, :2, :] * 2)
    assert runner.calls == [7, 4, 3] and runner.retries == ["out_of_memory"]


def test_out_of_memory_on_a_half_is_a_503_class_error() -> None:
    runner = FaultyRunner(fits=2, error=ort_errors.Fail(ARENA_OOM))
    with pytest.raises(DeviceOutOfMemory, match="ran out of memory on a call of 4 series") as caught:
        runner.run(_rows(8))
    assert runner.calls == [8, 4]  # once in halves, no deeper
    assert caught.value.retry_after_s == 1 and caught.value.code == "device_out_of_memory"
    single = FaultyRunner(fits=0, error=ort_errors.Fail(ARENA_OOM))
    with pytest.raises(DeviceOutOfMemory):
        single.run(_rows(1))
    assert single.calls == [1]  # one row cannot be halved


def test_other_device_faults_are_not_retried() -> None:
    runner = FaultyRunner(fits=0, error=ort_errors.EPFail(CUBLAS))
    with pytest.raises(DeviceError, match="CUBLAS failure 13") as caught:
        runner.run(_rows(6))
    assert runner.calls == [6] and caught.value.code == "device_error"


def test_graph_errors_go_up_as_they_are() -> None:
    runner = FaultyRunner(fits=0, error=ort_errors.InvalidArgument("Got invalid dimensions"))
    with pytest.raises(ort_errors.InvalidArgument):
        runner.run(_rows(3))


def test_a_loaded_version_runs_through_its_runner(toy_repository: Path) -> None:
    folder = toy_repository / "toy" / "2"
    model = OnnxModel(folder, load_manifest(folder / "manifest.json"), ONE_THREAD, max_rows=8)
    model.load()
    model.warmup()
    assert model.provider == CPU and model.loaded
    model.close()
    assert not model.loaded


# -- the bound runner's own errors (run_with_iobinding raises plain RuntimeErrors) ------------------------


def _raw_binding_error(folder: Path) -> RuntimeError:
    """What ONNX Runtime's run_with_iobinding itself raises for a bound input of the wrong shape."""
    session = create_session(folder / "model.onnx", ONE_THREAD)
    binding = session.io_binding()
    binding.bind_ortvalue_input("window", ort.OrtValue.ortvalue_from_numpy(np.zeros((1, 5, 7), np.float32)))
    binding.bind_output("forecast")
    with pytest.raises(RuntimeError) as caught:
        session.run_with_iobinding(binding)
    return caught.value


def test_a_real_binding_error_is_classified_and_goes_up_as_a_500() -> None:
    """A real error out of run_with_iobinding: a plain RuntimeError (not ONNX Runtime's typed ones), which
    the bound runner raises as a BindingError with the same text; a wrong shape is a bug, not the device:
    no retry, no 503."""
    folder = SHIPPED[0]
    raw = _raw_binding_error(folder)
    assert type(raw) is RuntimeError and str(raw).startswith("Error in execution: Got invalid dimensions")
    runner, manifest = _bound(folder, (1, 2))
    slot = runner._slots[0]
    wrong = ort.OrtValue.ortvalue_from_numpy(np.zeros((1, 5, manifest.n_channels), np.float32))
    slot.binding.bind_ortvalue_input("window", wrong)  # a bad binding
    retries: list[str] = []
    runner.on_retry = retries.append
    with pytest.raises(BindingError, match="Error in execution: Got invalid dimensions") as caught:
        runner.run(_feed(manifest, 1, np.random.default_rng(0)))
    assert type(caught.value.__cause__) is RuntimeError and classify_fault(caught.value) is None
    assert not retries


class _OutOfMemoryAbove:
    """A session's run_with_iobinding that fails as the CUDA provider's does (plain RuntimeError, "Error in
    execution: CUDA failure 2: out of memory") on buckets of more than `fits` rows."""

    def __init__(self, runner: BoundRunner, fits: int) -> None:
        self.inner, self.fits, self.buckets = runner.session.run_with_iobinding, fits, []
        self.rows = {id(slot.binding): slot.rows for slot in runner._slots}

    def __call__(self, binding: ort.IOBinding, run_options: ort.RunOptions | None = None) -> None:
        rows = self.rows[id(binding)]
        self.buckets.append(rows)
        if rows > self.fits:
            raise RuntimeError(f"Error in execution: {CUDA_OOM}")
        self.inner(binding, run_options)


def test_out_of_memory_on_the_bound_runner_is_retried_in_halves_then_503() -> None:
    folder = SHIPPED[0]
    runner, manifest = _bound(folder, (1, 2, 4, 8))
    plain = create_session(folder / "model.onnx", ONE_THREAD)
    failing = _OutOfMemoryAbove(runner, fits=4)
    runner.session.run_with_iobinding = failing  # type: ignore[method-assign]
    retries: list[str] = []
    runner.on_retry = retries.append
    feed = _feed(manifest, 7, np.random.default_rng(1))
    np.testing.assert_array_equal(runner.run(feed), plain.run(["forecast"], feed)[0])
    assert failing.buckets == [8, 4, 4] and retries == ["out_of_memory"]  # 7 rows, then 4 + 3
    failing.fits = 2
    with pytest.raises(DeviceOutOfMemory, match="out of memory on a call of 4 series") as caught:
        runner.run(_feed(manifest, 8, np.random.default_rng(2)))
    assert caught.value.code == "device_out_of_memory" and caught.value.retry_after_s == 1


# -- graph runners: one owner thread, and a capture that fails ---------------------------------------------


class _Threads:
    """Records the thread of every run_with_iobinding call (and can fail those that would capture)."""

    def __init__(self, runner: BoundRunner, fail_graph_runs: bool = False) -> None:
        self.inner, self.fail, self.idents = runner.session.run_with_iobinding, fail_graph_runs, []

    def __call__(self, binding: ort.IOBinding, run_options: ort.RunOptions | None = None) -> None:
        self.idents.append(threading.get_ident())
        if self.fail and run_options is not None and _graph_id(run_options) not in (None, GRAPH_ID_SKIP):
            raise RuntimeError(
                "Error in execution: CUDA failure 900: operation not permitted when stream is capturing"
            )
        self.inner(binding, run_options)


def _graph_id(run_options: ort.RunOptions) -> str | None:
    try:
        return run_options.get_run_config_entry(GRAPH_ID_KEY)
    except RuntimeError:  # not set
        return None


def test_a_runner_with_its_own_thread_makes_every_call_there(toy_repository: Path) -> None:
    """Warm-up and every call, from the loading thread, the event loop's or any pool's, run on the runner's
    one thread (ONNX Runtime keeps CUDA graphs per thread); such a runner is never called inline."""
    folder = toy_repository / "toy" / "1"
    manifest = load_manifest(folder / "manifest.json")
    runner = BoundRunner(
        create_session(folder / "model.onnx", ONE_THREAD), manifest, (1, 4), device="cpu", own_thread=True
    )
    assert runner.owner_thread is not None and runner.owner_thread != threading.get_ident()
    assert runner.policy.inline is False and runner.policy.max_calls == 1
    seen = _Threads(runner)
    runner.session.run_with_iobinding = seen  # type: ignore[method-assign]
    plain = create_session(folder / "model.onnx", ONE_THREAD)
    rng = np.random.default_rng(3)
    runner.warmup(_feed(manifest, 1, rng))
    feeds = [_feed(manifest, n, rng) for n in (1, 3, 4, 6, 2, 1)]
    with ThreadPoolExecutor(2) as pool:  # two other threads, alternately, and this one
        answers = list(pool.map(runner.run, feeds)) + [runner.run(f) for f in feeds]
    for feed, got in zip(feeds * 2, answers, strict=True):
        np.testing.assert_array_equal(got, plain.run(["forecast"], feed)[0])
    assert seen.idents and set(seen.idents) == {runner.owner_thread}
    runner.close()


def test_a_failed_capture_falls_back_to_the_runner_without_graphs(
    toy_repository: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The capture in warm-up fails (CUDA error 900, as a plain RuntimeError): one warning, the session
    made again without graphs, the owner thread given up, and the version serves, bit for bit."""
    folder = toy_repository / "toy" / "1"
    manifest = load_manifest(folder / "manifest.json")
    rebuilt: list[ort.InferenceSession] = []

    def rebuild() -> ort.InferenceSession:
        rebuilt.append(create_session(folder / "model.onnx", ONE_THREAD))
        return rebuilt[-1]

    session = create_session(folder / "model.onnx", ONE_THREAD)
    runner = BoundRunner(session, manifest, (1, 2, 4), device="cpu", own_thread=True, rebuild=rebuild)
    runner.graphs = True  # what the CUDA provider would run with: the CPU cannot capture, so pretend
    runner._build_slots()  # graph ids 1, 2, 3 on the buckets' run options
    assert [_graph_id(s.run_options) for s in runner._slots] == ["1", "2", "3"]  # 0 is ONNX Runtime's
    seen = _Threads(runner, fail_graph_runs=True)
    session.run_with_iobinding = seen  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="app.engine.runners"):
        out = runner.warmup(_feed(manifest, 1, np.random.default_rng(4)))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "capturing CUDA graphs failed" in warnings[0].getMessage()
    assert "CUDA failure 900" in warnings[0].getMessage()
    assert out.shape == (1, manifest.horizon, manifest.n_channels)
    assert not runner.graphs and runner.session is rebuilt[0] and runner.owner_thread is None
    # the regular runs came first, every bucket up and down with the skip id, then the failing capture
    assert len(seen.idents) == 2 * len(runner.buckets) + 1
    plain = create_session(folder / "model.onnx", ONE_THREAD)
    feed = _feed(manifest, 3, np.random.default_rng(5))
    np.testing.assert_array_equal(runner.run(feed), plain.run(["forecast"], feed)[0])
    assert [_graph_id(s.run_options) for s in runner._slots] == [None, None, None]


def test_a_capture_that_works_runs_each_graph_id_enough_times(toy_repository: Path) -> None:
    """Warm-up with graphs: each bucket once up and once down without capture (the arena sized for every
    shape), then each graph id GRAPH_RUNS_PER_ID times: ONNX Runtime's regular runs, capture, replay."""
    folder = toy_repository / "toy" / "1"
    manifest = load_manifest(folder / "manifest.json")
    session = create_session(folder / "model.onnx", ONE_THREAD)
    runner = BoundRunner(session, manifest, (1, 2), device="cpu", own_thread=True)
    runner.graphs = True
    runner._build_slots()
    ids: list[str | None] = []
    inner = session.run_with_iobinding

    def record(binding: ort.IOBinding, run_options: ort.RunOptions | None = None) -> None:
        ids.append(_graph_id(run_options) if run_options is not None else None)
        inner(binding, run_options)

    session.run_with_iobinding = record  # type: ignore[method-assign]
    runner.warmup(_feed(manifest, 1, np.random.default_rng(6)))
    assert ids == ["-1"] * 4 + ["1"] * GRAPH_RUNS_PER_ID + ["2"] * GRAPH_RUNS_PER_ID + ["1"]
    runner.close()


def test_close_waits_for_the_call_in_flight_and_refuses_later_ones(toy_repository: Path) -> None:
    folder = toy_repository / "toy" / "1"
    runner, manifest = _bound(folder.parent.parent / "toy" / "1", (1,))
    inside, go = threading.Event(), threading.Event()
    inner = runner.session.run_with_iobinding

    def slow(binding: ort.IOBinding, run_options: ort.RunOptions | None = None) -> None:
        inside.set()
        go.wait(30)
        inner(binding, run_options)

    runner.session.run_with_iobinding = slow  # type: ignore[method-assign]
    feed = _feed(manifest, 1, np.random.default_rng(7))
    with ThreadPoolExecutor(2) as pool:
        call = pool.submit(runner.run, feed)
        assert inside.wait(30)
        closing = pool.submit(runner.close)
        assert not closing.done()
        go.set()
        assert call.result(30).shape == (1, manifest.horizon, manifest.n_channels)
        closing.result(30)
    with pytest.raises(RuntimeError, match="closed"):
        runner.run(feed)


# -- pinned staging and the copies (a fake CUDA runtime over host memory) ----------------------------------


class FakeCudart:
    """The CUDA runtime's calls on host memory: copies are memmove, memset is memset; records each call.
    `register_error`: what cudaHostRegister returns (712: already registered)."""

    def __init__(self, register_error: int = 0) -> None:
        self.register_error, self.calls, self.last_error = register_error, [], 0

    def host_register(self, ptr: int, size: int) -> int:
        self.calls.append(("register", ptr, size))
        self.last_error = self.register_error
        return self.register_error

    def host_unregister(self, ptr: int) -> int:
        self.calls.append(("unregister", ptr, 0))
        return 0

    def get_last_error(self) -> int:
        self.calls.append(("get_last_error", 0, 0))
        error, self.last_error = self.last_error, 0
        return error

    def error_name(self, code: int) -> str:
        return {712: "cudaErrorHostMemoryAlreadyRegistered"}.get(code, str(code))

    def memcpy(self, dst: int, src: int, size: int, kind: int) -> int:
        self.calls.append(("H2D" if kind == 1 else "D2H", dst, size))
        ctypes.memmove(dst, src, size)
        return 0

    def memset(self, ptr: int, value: int, size: int) -> int:
        self.calls.append(("memset", ptr, size))
        ctypes.memset(ptr, value, size)
        return 0

    def synchronize_legacy_stream(self) -> int:
        return 0

    def of(self, kind: str) -> list[tuple[str, int, int]]:
        return [c for c in self.calls if c[0] == kind]


LAYOUTS = [((1, 96, 7), np.dtype(np.float32)), ((1,), np.dtype(np.int64)), ((3, 24, 7), np.dtype(np.float32))]


def test_the_staging_is_one_page_aligned_block_registered_once() -> None:
    cudart = FakeCudart()
    block = PinnedBlock(LAYOUTS, cudart)
    assert block.pinned and block.block.ctypes.data % PAGE == 0 and block.size % PAGE == 0
    assert cudart.calls == [("register", block.block.ctypes.data, block.size)]
    spans = sorted((v.ctypes.data, v.ctypes.data + v.nbytes) for v in block.views)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # disjoint
    assert spans[0][0] >= block.block.ctypes.data and spans[-1][1] <= block.block.ctypes.data + block.size
    assert [(v.shape, v.dtype) for v in block.views] == [(s, d) for s, d in LAYOUTS]
    block.release()
    assert cudart.of("unregister") == [("unregister", block.block.ctypes.data, 0)] and not block.pinned


def test_a_failed_registration_clears_the_cuda_error_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    cudart = FakeCudart(register_error=712)
    with caplog.at_level(logging.WARNING, logger="app.engine.cuda"):
        block = PinnedBlock(LAYOUTS, cudart)
    assert not block.pinned and block.error == "cudaErrorHostMemoryAlreadyRegistered"
    assert [c[0] for c in cudart.calls] == ["register", "get_last_error"] and cudart.last_error == 0
    assert "cudaErrorHostMemoryAlreadyRegistered" in caplog.text and "stay pageable" in caplog.text
    block.release()
    assert not cudart.of("unregister")  # nothing was registered


def test_a_block_dropped_without_release_is_unregistered_before_its_memory_is_freed() -> None:
    """A runner dropped on a failed load never calls release: its registration must still go, while the
    memory is still the block's (on an H200 the next block of the same size, mapped at the same address,
    failed with cudaErrorHostMemoryAlreadyRegistered)."""
    cudart = FakeCudart()
    block = PinnedBlock(LAYOUTS, cudart)
    address, alive = block.block.ctypes.data, weakref.ref(block.block.base)
    seen: list[bool] = []
    cudart.host_unregister = lambda ptr: seen.append(alive() is not None) or 0  # type: ignore[method-assign]
    del block
    gc.collect()
    assert seen == [True] and alive() is None and address
    again = PinnedBlock(LAYOUTS, cudart)
    again.release()
    again.release()  # once only
    assert len(seen) == 2


class _HostDevice(BoundRunner):
    """The CUDA code path of the bound runner with "device" buffers in host memory (a CPU session binds
    them) and FakeCudart's copies: what moves between staging and device, on a machine without a GPU."""

    def _value(self, array: np.ndarray) -> ort.OrtValue:
        value = ort.OrtValue.ortvalue_from_numpy(np.full_like(array, 7))  # not zero: _value must zero it
        assert self._cudart is not None
        self._cudart.memset(value.data_ptr(), 0, array.nbytes)
        return value


def test_copies_move_only_the_rows_used_and_zero_the_padding_once() -> None:
    folder = SHIPPED[-1]
    manifest = load_manifest(folder / "manifest.json")
    session = create_session(folder / "model.onnx", ONE_THREAD)
    cudart = FakeCudart()
    runner = _HostDevice(session, manifest, (1, 8), device="cuda", cudart=cudart)
    assert runner.policy.inline is False  # CUDA calls never run on the event loop
    assert len(cudart.of("register")) == 1 and runner._block is not None and runner._block.pinned
    plain = create_session(folder / "model.onnx", ONE_THREAD)
    slot = runner._slots[1]
    row = {name: a[0].nbytes for name, a in slot.host.items()}
    out_row = slot.host_out[0].nbytes
    rng = np.random.default_rng(8)
    for rows, zeroed in ((7, None), (3, 4), (3, None), (5, None), (2, 3)):
        cudart.calls.clear()
        feed = _feed(manifest, rows, rng)
        np.testing.assert_array_equal(runner.run(feed), plain.run(["forecast"], feed)[0], err_msg=f"{rows}")
        assert [size for _, _, size in cudart.of("H2D")] == [rows * row[n] for n in slot.host]
        assert [size for _, _, size in cudart.of("D2H")] == [rows * out_row]
        assert [size for _, _, size in cudart.of("memset")] == (
            [] if zeroed is None else [zeroed * row[n] for n in slot.host]
        )
        for name, value in slot.device.items():  # the device rows past this call's are zeros
            assert not value.numpy()[rows:].any(), name
    runner.close()
    assert len(cudart.of("unregister")) == 1


class _CudaSession:
    """What PlainRunner reads of a session on the CUDA provider."""

    def get_providers(self) -> list[str]:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_plain_cuda_calls_never_run_inline_on_the_event_loop(toy_repository: Path) -> None:
    assert PlainRunner(_CudaSession()).policy.inline is False  # type: ignore[arg-type]
    cpu = PlainRunner(create_session(toy_repository / "toy" / "1" / "model.onnx", ONE_THREAD))
    assert cpu.policy.inline is True


def test_a_cuda_session_gets_the_plain_runner_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """On an H200 plain session.run took 5-21% fewer ms than the bound runner at every batch (2026-12-04):
    a version on CUDA is served by the plain runner unless RSA_CUDA_IO_BINDING or RSA_CUDA_GRAPHS asks
    for the bound one. (A CPU session that says it runs on CUDA: the choice, not the device.)"""
    import app.engine.runners as runners

    folder = SHIPPED[0]
    manifest = load_manifest(folder / "manifest.json")
    real = runners.create_session

    def on_cuda(path: Path, options: RuntimeOptions, graphs: bool = False) -> ort.InferenceSession:
        session = real(path, replace(options, device="cpu"))
        monkeypatch.setattr(session, "get_providers", lambda: ["CUDAExecutionProvider", CPU])
        return session

    monkeypatch.setattr(runners, "create_session", on_cuda)
    asked: list[bool] = []
    monkeypatch.setattr(runners, "BoundRunner", lambda *a, **k: asked.append(k["graphs"]) or "bound")
    default = create_runner(folder / "model.onnx", manifest, RuntimeOptions(device="cuda"), 64)
    assert type(default) is PlainRunner and default.provider == "CUDAExecutionProvider"
    assert default.policy.inline is False  # a GPU round trip never runs on the event loop
    bound = RuntimeOptions(device="cuda", cuda_io_binding=True)
    graphs = RuntimeOptions(device="cuda", cuda_graphs=True)
    assert create_runner(folder / "model.onnx", manifest, bound, 64) == "bound"
    assert create_runner(folder / "model.onnx", manifest, graphs, 64) == "bound" and asked == [False, True]
