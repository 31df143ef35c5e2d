"""Sessions and a version's OnnxModel: threads, IO checks, the lazy inspection session, arena release."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from app.artifacts.manifest import load_manifest
from app.engine.model import OnnxModel
from app.engine.providers import CPU, RuntimeOptions
from app.engine.runners import TRIM_ABOVE_ROWS
from app.engine.session import (
    ALLOW_SPINNING_KEY,
    SessionLoadError,
    default_intra_op_threads,
    session_options,
)
from tests.app.conftest import ort_forecast, ort_run


def _model(folder: Path, options: RuntimeOptions) -> OnnxModel:
    model = OnnxModel(folder, load_manifest(folder / "manifest.json"), options)
    model.load()
    return model


def test_threads_default_to_cpu_affinity() -> None:
    assert default_intra_op_threads() == len(os.sched_getaffinity(0))
    assert session_options(RuntimeOptions()).intra_op_num_threads == len(os.sched_getaffinity(0))
    assert session_options(RuntimeOptions(intra_op_threads=3)).intra_op_num_threads == 3


def test_cuda_sessions_get_one_intra_op_thread_that_does_not_spin() -> None:
    """On CUDA the graph's kernels run on the GPU: one intra-op thread, no spinning, unless the operator
    sets RSA_INTRA_OP_THREADS; CPU sessions keep theirs (spinning is ONNX Runtime's default there)."""
    cuda = session_options(RuntimeOptions(), cuda=True)
    assert cuda.intra_op_num_threads == 1
    assert cuda.get_session_config_entry(ALLOW_SPINNING_KEY) == "0"
    assert session_options(RuntimeOptions(intra_op_threads=4), cuda=True).intra_op_num_threads == 4
    with pytest.raises(RuntimeError, match="does not have configuration"):
        session_options(RuntimeOptions()).get_session_config_entry(ALLOW_SPINNING_KEY)
    so = session_options(RuntimeOptions())
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL


def test_forecast_matches_direct_call_and_inspect_is_lazy(toy_repository: Path) -> None:
    folder = toy_repository / "toy" / "1"
    model = _model(folder, RuntimeOptions(device="cpu", intra_op_threads=1))
    model.warmup()
    assert model.provider == CPU and model.inspect_provider is None
    x = np.random.default_rng(0).normal(0, 1, (5, 8, 3)).astype(np.float32)
    np.testing.assert_allclose(
        model.run_forecast(model.feed(x)), ort_forecast(folder / "model.onnx", x), atol=1e-6
    )
    result = model.inspect_feed(model.feed(x))
    assert model.inspect_provider == CPU
    ref = ort_run(folder / "inspect.onnx", x)
    for got, want in zip((result.forecast, result.softmax, result.rem, result.mixed), ref, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_model_not_matching_manifest_is_refused(toy_repository: Path, tmp_path: Path) -> None:
    folder = tmp_path / "1"
    shutil.copytree(toy_repository / "toy" / "1", folder)
    manifest = load_manifest(folder / "manifest.json")
    wrong = manifest.model_copy(update={"input_length": 9})
    with pytest.raises(SessionLoadError, match="does not match"):
        OnnxModel(folder, wrong, RuntimeOptions(device="cpu")).load()
    model = OnnxModel(folder, manifest.model_copy(update={"horizon": 5}), RuntimeOptions(device="cpu"))
    model.load()
    with pytest.raises(SessionLoadError, match="forecast shape"):
        model.warmup()
    (folder / "model.onnx").write_bytes(b"not onnx")
    with pytest.raises(SessionLoadError, match="cannot load"):
        OnnxModel(folder, manifest, RuntimeOptions(device="cpu")).load()


def test_arena_kept_while_busy_and_released_only_after_big_calls(toy_repository: Path) -> None:
    """The CPU arena is on (fast back-to-back calls); `release_memory` shrinks it only when a call of more
    than TRIM_ABOVE_ROWS rows ran since the last release, and the session still answers the same after.
    (RSS itself: tests/bench/test_memory.py.)"""
    assert session_options(RuntimeOptions()).enable_cpu_mem_arena
    folder = toy_repository / "toy" / "1"
    model = _model(folder, RuntimeOptions(device="cpu", intra_op_threads=1))
    model.warmup()
    x = np.random.default_rng(1).normal(0, 1, (TRIM_ABOVE_ROWS + 1, 8, 3)).astype(np.float32)
    assert not model.release_memory()  # only small calls so far: nothing to give back
    model.run_forecast(model.feed(x[:TRIM_ABOVE_ROWS]))
    assert not model.release_memory()
    before = model.run_forecast(model.feed(x))
    assert model.release_memory() and not model.release_memory()  # once per big spell
    np.testing.assert_array_equal(model.run_forecast(model.feed(x)), before)
