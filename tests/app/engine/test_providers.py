"""Provider choice: CUDA asked for only where it can run, with explicit options and TF32 off by default."""

from __future__ import annotations

import logging

import onnxruntime as ort
import pytest

from app.artifacts.contract import CUDA_EXACT_OPTIONS
from app.engine import providers
from app.engine.providers import CPU, CUDA, RuntimeOptions, choose_providers, cuda_provider_options


@pytest.fixture
def cuda_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build with the CUDA provider, on a host whose driver shows two GPUs."""
    monkeypatch.setattr(ort, "get_available_providers", lambda: [CUDA, CPU])
    monkeypatch.setattr(providers, "cuda_device_count", lambda: 2)
    monkeypatch.setattr(providers, "preload_cuda_libraries", lambda: None)


def test_cpu_device_requests_cpu_only() -> None:
    assert choose_providers(RuntimeOptions(device="cpu")) == [CPU]


def test_cuda_gets_explicit_options_with_tf32_off(cuda_host: None) -> None:
    chosen = choose_providers(RuntimeOptions(device="auto", cuda_device_id=1, gpu_mem_limit_bytes=2**30))
    assert chosen == [
        (
            CUDA,
            {
                "device_id": 1,
                "arena_extend_strategy": "kSameAsRequested",
                "cudnn_conv_algo_search": "HEURISTIC",
                "do_copy_in_default_stream": True,
                "use_tf32": "0",
                "gpu_mem_limit": 2**30,
            },
        ),
        CPU,
    ]
    assert CUDA_EXACT_OPTIONS == {"use_tf32": "0"}  # what the exporter verifies a graph under
    cuda, _ = choose_providers(RuntimeOptions(device="cuda"))
    assert isinstance(cuda, tuple) and "gpu_mem_limit" not in cuda[1] and "enable_cuda_graph" not in cuda[1]


def test_tf32_and_graphs_are_explicit_opt_ins() -> None:
    assert cuda_provider_options(RuntimeOptions(cuda_tf32=True))["use_tf32"] == "1"
    assert cuda_provider_options(RuntimeOptions())["use_tf32"] == "0"
    assert cuda_provider_options(RuntimeOptions(), graphs=True)["enable_cuda_graph"] == "1"


def test_no_cuda_in_this_build(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(ort, "get_available_providers", lambda: [CPU])
    monkeypatch.setattr(providers, "_said", set())
    with caplog.at_level(logging.INFO, logger="app.engine.providers"):
        assert choose_providers(RuntimeOptions(device="auto")) == [CPU]
        assert choose_providers(RuntimeOptions(device="cuda")) == [CPU]
    assert [r.levelno for r in caplog.records] == [logging.INFO, logging.WARNING]
    assert "no CUDAExecutionProvider" in caplog.records[1].getMessage()


def test_cuda_is_not_asked_for_without_a_visible_gpu(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A CPU host with the onnxruntime-gpu wheel: auto runs on CPU with one calm line, never asking ORT for
    CUDA (which logs an error about the CUDA libraries per session)."""
    monkeypatch.setattr(ort, "get_available_providers", lambda: [CUDA, CPU])
    monkeypatch.setattr(providers, "cuda_device_count", lambda: 0)
    monkeypatch.setattr(providers, "_said", set())
    with caplog.at_level(logging.INFO, logger="app.engine.providers"):
        for _ in range(3):  # three versions load: one line
            assert choose_providers(RuntimeOptions(device="auto")) == [CPU]
    assert len(caplog.records) == 1 and caplog.records[0].levelno == logging.INFO
    assert "shows this process 0 GPU(s)" in caplog.text


def test_this_machine_has_no_visible_gpu() -> None:
    """The detection itself, where the suite runs (no NVIDIA driver: libcuda.so.1 cannot be loaded)."""
    providers.cuda_device_count.cache_clear()
    assert providers.cuda_device_count() == 0


def test_a_session_on_a_cpu_host_logs_no_cuda_error(
    toy_repository, capfd: pytest.CaptureFixture[str]
) -> None:
    """What a user saw with RSA_DEVICE=auto: ONNX Runtime's own error lines about the CUDA libraries."""
    from app.engine.session import create_session

    create_session(
        toy_repository / "toy" / "1" / "model.onnx", RuntimeOptions(device="auto", intra_op_threads=1)
    )
    err = capfd.readouterr().err
    assert "libonnxruntime_providers_cuda" not in err and "libcublas" not in err
