"""Runners: the bound (IOBinding, bucketed) runner the CUDA provider uses, run here on the CPU device, answers
bit for bit as the plain session; device faults raised with ONNX Runtime's own error types are retried
in halves (out of memory) or become 503-class domain errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

from app.artifacts.manifest import Manifest, load_manifest
from app.core.errors import DeviceError, DeviceOutOfMemory
from app.engine.batching import Feed
from app.engine.model import OnnxModel
from app.engine.providers import CPU, RuntimeOptions
from app.engine.runners import (
    BoundRunner,
    CpuRunner,
    Runner,
    classify_fault,
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
CUBLAS = "CUBLAS failure 13: CUBLAS_STATUS_EXECUTION_FAILED ; GPU=0"


@pytest.mark.parametrize(
    ("exc", "fault"),
    [
        (
            ort_errors.RuntimeException(f"[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : {CUDA_OOM}"),
            "out_of_memory",
        ),
        (ort_errors.Fail(f"[ONNXRuntimeError] : 1 : FAIL : {ARENA_OOM}"), "out_of_memory"),
        (ort_errors.RuntimeException("CUBLAS_STATUS_ALLOC_FAILED"), "out_of_memory"),
        (ort_errors.EPFail(CUBLAS), "device"),
        (ort_errors.RuntimeException(CUBLAS), "device"),
        (ort_errors.DeviceReset("the device was reset"), "device"),
        (ort_errors.EPFail("EP failure"), "device"),
        (ort_errors.InvalidArgument("Got invalid dimensions for input: window"), None),
        (ort_errors.Fail("Non-zero status code returned while running Reshape node"), None),
        (RuntimeError("CUDA out of memory"), None),  # not ONNX Runtime's: a bug, not the device
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
