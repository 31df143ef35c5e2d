"""A version's graph inputs from windows and phases: `window` [n, L, C] float32, plus `phase` [n] int64
exactly when the manifest has a cycle (ONNX Runtime refuses an input the graph does not declare, and needs
every one it does). The one place that knows it, for the service and the engine alike."""

from __future__ import annotations

import numpy as np

from app.artifacts.contract import FORECAST_INPUT, PHASE_INPUT
from app.artifacts.manifest import Manifest


def build_feed(manifest: Manifest, windows: np.ndarray, phases: np.ndarray | None) -> dict[str, np.ndarray]:
    feed: dict[str, np.ndarray] = {FORECAST_INPUT: np.ascontiguousarray(windows, dtype=np.float32)}
    cycle = manifest.cycle
    if cycle is None:
        if phases is not None:
            raise ValueError(f"model {manifest.name} has no cycle, so it takes no phase")
        return feed
    if phases is None:
        raise ValueError(f"model {manifest.name} has a cycle (period {cycle.period}); it needs phases")
    phase = np.ascontiguousarray(phases, dtype=np.int64)
    if phase.shape != windows.shape[:1]:
        raise ValueError(f"model {manifest.name}: {phase.shape} phases for {windows.shape[0]} windows")
    feed[PHASE_INPUT] = phase
    return feed
