"""A version's graph inputs from windows and phases: `window` [n, L, C] float32, plus `phase` [n] int64
exactly when the manifest has a cycle, or `covariates` [n, D] float32 exactly when a global model has
covariates, or `local` [n, H] and `local_weight` [n, 1] float32 exactly when it is a hybrid (its local
models' forecasts, fitted here on the window itself: app/artifacts/local_models.py). ONNX Runtime refuses
an input the graph does not declare, and needs every one it does. The one place that knows it, for the
service, the engine and the batch scorer alike."""

from __future__ import annotations

import numpy as np

from app.artifacts.contract import (
    COVARIATE_INPUT,
    FORECAST_INPUT,
    LOCAL_INPUT,
    LOCAL_WEIGHT_INPUT,
    PHASE_INPUT,
)
from app.artifacts.hybrid import LocalSpec
from app.artifacts.manifest import Manifest


def local_inputs(local: LocalSpec, windows: np.ndarray, still_length: int | None) -> dict[str, np.ndarray]:
    """A hybrid's `local` and `local_weight` inputs for float32 windows (the exporter's parity check and
    the refit's publish feed their graphs with this too); `still_length`: LocalSpec.feed's."""
    values, weight = local.feed(windows, still_length)
    return {LOCAL_INPUT: values.astype(np.float32), LOCAL_WEIGHT_INPUT: weight.astype(np.float32)}


def build_feed(
    manifest: Manifest, windows: np.ndarray, phases: np.ndarray | None, covariates: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    feed: dict[str, np.ndarray] = {FORECAST_INPUT: np.ascontiguousarray(windows, dtype=np.float32)}
    layout = manifest.panel.layout if manifest.panel is not None else None
    if layout is None:
        if covariates is not None:
            raise ValueError(f"model {manifest.name} has no covariates")
    else:
        if covariates is None or covariates.shape != (len(windows), layout.width):
            got = None if covariates is None else covariates.shape
            raise ValueError(
                f"model {manifest.name} needs covariates [{len(windows)}, {layout.width}], got {got}"
            )
        feed[COVARIATE_INPUT] = np.ascontiguousarray(covariates, dtype=np.float32)
    local = manifest.panel.local_spec if manifest.panel is not None else None
    if local is not None:  # the hybrid's local models, fitted on the window the graph reads
        feed.update(local_inputs(local, feed[FORECAST_INPUT], manifest.still_length))
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


def zeros_feed(manifest: Manifest, rows: int) -> dict[str, np.ndarray]:
    """All-zeros inputs of `rows` rows (phase 0, zero covariates), for warm-ups and cost probes."""
    layout = manifest.panel.layout if manifest.panel is not None else None
    return build_feed(
        manifest,
        np.zeros((rows, manifest.input_length, manifest.n_channels), np.float32),
        None if manifest.cycle is None else np.zeros(rows, np.int64),
        None if layout is None else np.zeros((rows, layout.width), np.float32),
    )
