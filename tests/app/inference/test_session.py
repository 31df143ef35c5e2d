"""ONNX Runtime sessions: provider choice and fallback, threads, IO checks, lazy inspection session."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from app.artifacts.manifest import load_manifest
from app.inference.session import (
    CPU,
    CUDA,
    TRIM_ABOVE_ROWS,
    OnnxModel,
    RuntimeOptions,
    SessionLoadError,
    choose_providers,
    default_intra_op_threads,
    session_options,
)
from tests.app.conftest import ort_forecast, ort_run


def _model(folder: Path, options: RuntimeOptions) -> OnnxModel:
    model = OnnxModel(folder, load_manifest(folder / "manifest.json"), options)
    model.load()
    return model


def test_cpu_device_requests_cpu_only() -> None:
    assert choose_providers(RuntimeOptions(device="cpu")) == [CPU]


def test_cuda_gets_explicit_options_when_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ort, "get_available_providers", lambda: [CUDA, CPU])
    providers = choose_providers(RuntimeOptions(device="auto", cuda_device_id=1, gpu_mem_limit_bytes=2**30))
    assert providers == [
        (
            CUDA,
            {
                "device_id": 1,
                "arena_extend_strategy": "kSameAsRequested",
                "cudnn_conv_algo_search": "HEURISTIC",
                "do_copy_in_default_stream": True,
                "gpu_mem_limit": 2**30,
            },
        ),
        CPU,
    ]
    cuda, _ = choose_providers(RuntimeOptions(device="cuda"))
    assert isinstance(cuda, tuple) and "gpu_mem_limit" not in cuda[1]


def test_no_cuda_in_this_build(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(ort, "get_available_providers", lambda: [CPU])
    assert choose_providers(RuntimeOptions(device="auto")) == [CPU]
    with caplog.at_level(logging.WARNING, logger="app.inference.session"):
        assert choose_providers(RuntimeOptions(device="cuda")) == [CPU]
    assert "no CUDAExecutionProvider" in caplog.text


def test_cuda_requested_falls_back_to_cpu_with_a_warning(
    toy_repository: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """This machine's onnxruntime-gpu lists CUDA but cannot create it: the session must run on CPU."""
    if CUDA not in ort.get_available_providers():
        pytest.skip("this onnxruntime build has no CUDA provider")
    with caplog.at_level(logging.INFO, logger="app.inference.session"):
        model = _model(toy_repository / "toy" / "1", RuntimeOptions(device="auto", intra_op_threads=1))
    if model.provider == CUDA:
        pytest.skip("a GPU is present: no fallback to observe")
    assert model.provider == CPU
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("fell back to CPUExecutionProvider" in r.getMessage() for r in warnings)
    assert any("providers in use ['CPUExecutionProvider']" in r.getMessage() for r in caplog.records)


def test_threads_default_to_cpu_affinity() -> None:
    assert default_intra_op_threads() == len(os.sched_getaffinity(0))
    assert session_options(RuntimeOptions()).intra_op_num_threads == len(os.sched_getaffinity(0))
    assert session_options(RuntimeOptions(intra_op_threads=3)).intra_op_num_threads == 3
    so = session_options(RuntimeOptions())
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL


def test_forecast_matches_direct_call_and_inspect_is_lazy(toy_repository: Path) -> None:
    folder = toy_repository / "toy" / "1"
    model = _model(folder, RuntimeOptions(device="cpu", intra_op_threads=1))
    model.warmup()
    assert model.provider == CPU and model.inspect_provider is None
    x = np.random.default_rng(0).normal(0, 1, (5, 8, 3)).astype(np.float32)
    np.testing.assert_allclose(model.forecast(x), ort_forecast(folder / "model.onnx", x), atol=1e-6)
    result = model.inspect(x)
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
    model.forecast(x[:TRIM_ABOVE_ROWS])
    assert not model.release_memory()
    before = model.forecast(x)
    assert model.release_memory() and not model.release_memory()  # once per big spell
    np.testing.assert_array_equal(model.forecast(x), before)
