"""The service on CUDA, through HTTP: the README's request answered on CUDAExecutionProvider within the
exporter's bound of the CPU's answer, OIP v2 alike, GPU memory metrics from NVML."""

from __future__ import annotations

import json

import numpy as np

from app.engine.runners import BoundRunner, PlainRunner
from tests.app.conftest import engine_of, make_settings, running_client
from tests.app.metrics_scrape import scrape, total
from tests.gpu.conftest import REPO, channel_std

REQUEST = json.loads((REPO / "docs" / "examples" / "forecast_request.json").read_text())
REPOSITORY = REPO / "model_repository"


def _forecast(device: str, **settings: object) -> tuple[dict, dict]:
    with running_client(
        make_settings(REPOSITORY, device=device, intra_op_threads=None, **settings)
    ) as client:
        r = client.post("/v1/models/etth1-rsa/forecast", json=REQUEST)
        assert r.status_code == 200, r.text
        metrics = scrape(client)
        if device == "cuda":
            runner = engine_of(client).get("etth1-rsa").model.runner  # type: ignore[union-attr]
            # Plain session.run is the CUDA default; graphs need the bound runner's fixed buffers.
            assert type(runner) is (BoundRunner if settings.get("cuda_graphs") else PlainRunner)
        return r.json(), metrics


def test_the_readme_request_on_cuda_is_the_cpus_answer() -> None:
    cuda, metrics = _forecast("cuda")
    cpu, _ = _forecast("cpu")
    assert cuda["provider"] == "CUDAExecutionProvider" and cpu["provider"] == "CPUExecutionProvider"
    a = np.array(cuda["forecasts"][0]["forecast"], np.float64)
    b = np.array(cpu["forecasts"][0]["forecast"], np.float64)
    assert float(np.max(np.abs(a - b) / channel_std())) <= 1e-4
    assert (
        total(metrics, "rsa_gpu_memory_used_bytes") > 0 and total(metrics, "rsa_gpu_memory_total_bytes") > 0
    )


def test_graphs_change_no_answer() -> None:
    """Within the exporter's 1e-4 std of the plain session's answer, as tests/gpu/test_runners.py bounds
    every runner: cuBLAS picks its kernels by shape, so bits may differ where a bucket is not the call's
    size (H200, 2026-12-04: 1.9e-6 raw on v1-v3)."""
    plain, _ = _forecast("cuda")
    graphs, _ = _forecast("cuda", cuda_graphs=True)
    a = np.array(plain["forecasts"][0]["forecast"], np.float64)
    b = np.array(graphs["forecasts"][0]["forecast"], np.float64)
    diff = float(np.max(np.abs(a - b) / channel_std()))
    print(f"graphs vs plain through the service: {diff:.2e} std")
    assert diff <= 1e-4
