"""The GPU lane: tests that need a CUDA device and onnxruntime-gpu's CUDA provider.

Everywhere else (CI, this project's 2-core machines) every test here is skipped with the reason shown in
pytest's summary (`-ra`). On a GPU host, `bash scripts/gpu-lane.sh OUT` runs the parity and runner tests with
the CUDA benches and writes their tables into OUT; `--slow` runs the others (docs/gpu.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from app.artifacts.manifest import Manifest
from app.engine.providers import CUDA, cuda_device_count

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHIPPED = sorted((REPO / "model_repository" / "etth1-rsa").iterdir(), key=lambda p: int(p.name))
ETTH1 = REPO / "data" / "ETT" / "ETTh1.csv"
TRAIN_ROWS = 8640  # ETT's standard training rows: the scaler the shipped models were trained with


def cuda_missing() -> str | None:
    """Why the CUDA provider cannot run here, or None where it can."""
    if CUDA not in ort.get_available_providers():
        return f"GPU lane: this onnxruntime build has no {CUDA} (install onnxruntime-gpu)"
    if cuda_device_count() == 0:
        return "GPU lane: the CUDA driver shows this process no GPU (no NVIDIA driver, or no device)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = cuda_missing()
    if reason is None:
        return
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.skip(reason=reason))


def channel_std() -> np.ndarray:
    """Each channel's std over ETTh1's training rows: the unit of the exporter's 1e-4 bound."""
    values = np.loadtxt(ETTH1, delimiter=",", skiprows=1, usecols=range(1, 8), max_rows=TRAIN_ROWS)
    return values.std(axis=0)


def real_windows(manifest: Manifest, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """`n` ETTh1 windows at random starts, raw scale, with the phase of each first row (hourly data from
    2016-07-01 00:00, so row r's phase in a daily cycle is r mod 24)."""
    values = np.loadtxt(ETTH1, delimiter=",", skiprows=1, usecols=range(1, 8)).astype(np.float32)
    starts = np.random.default_rng(seed).integers(0, len(values) - manifest.input_length, n)
    feed = {"window": np.stack([values[s : s + manifest.input_length] for s in starts])}
    if manifest.cycle is not None:
        first = int(np.datetime64("2016-07-01T00:00:00").astype("datetime64[s]").astype(np.int64))
        step = int(manifest.cycle.step_seconds)
        feed["phase"] = ((first // step + starts) % manifest.cycle.period).astype(np.int64)
    return feed
