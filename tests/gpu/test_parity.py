"""CUDA computes what the exporter verified: every shipped version within 1e-4 of a channel's std of the
CPU session, with the service's default options (TF32 off). TF32's own error is measured and printed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.artifacts.manifest import load_manifest
from app.core.config import Settings
from app.engine.providers import CPU, CUDA, RuntimeOptions
from app.engine.session import create_session
from tests.gpu.conftest import SHIPPED, channel_std, real_windows

TOLERANCE = 1e-4  # the exporter's (export.onnx.TOLERANCE), in units of each channel's training std


def _worst(folder: Path, options: RuntimeOptions) -> tuple[float, float]:
    """(max |CUDA - CPU| / std, max |CUDA - CPU| raw) over 64 real windows and 64 random ones."""
    manifest = load_manifest(folder / "manifest.json")
    cpu = create_session(folder / "model.onnx", RuntimeOptions(device="cpu"))
    cuda = create_session(folder / "model.onnx", options)
    assert cuda.get_providers()[0] == CUDA and cpu.get_providers()[0] == CPU
    real = real_windows(manifest, 64)
    noise = dict(real, window=(real["window"] + np.random.default_rng(1).normal(0, 3, real["window"].shape)))
    noise["window"] = noise["window"].astype(np.float32)
    std, worst, raw = channel_std(), 0.0, 0.0
    for feed in (real, noise):
        a, b = (s.run(["forecast"], feed)[0].astype(np.float64) for s in (cuda, cpu))
        worst = max(worst, float(np.max(np.abs(a - b) / std)))
        raw = max(raw, float(np.max(np.abs(a - b))))
    return worst, raw


def test_tf32_is_off_by_default() -> None:
    assert Settings().cuda_tf32 is False


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: f"v{p.name}")
def test_cuda_matches_cpu_within_the_exporters_bound(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exact, exact_raw = _worst(folder, RuntimeOptions(device="cuda"))
    tf32, tf32_raw = _worst(folder, replace(RuntimeOptions(device="cuda"), cuda_tf32=True))
    with capsys.disabled():
        print(
            f"\nv{folder.name}: max |CUDA - CPU| = {exact:.2e} std ({exact_raw:.2e} raw) with TF32 off; "
            f"{tf32:.2e} std ({tf32_raw:.2e} raw) with RSA_CUDA_TF32=true"
        )
    assert exact <= TOLERANCE
