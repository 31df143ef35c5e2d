"""The engine's plain types, for every side of the engine boundary: a leaf module.

It imports numpy and nothing of the engine (no onnxruntime, no batcher), so that a front end (the
engine API, its client, the protocols, the inference service) can name what crosses the boundary without
loading a runtime. tests/test_imports.py checks that `import app.engine.api` loads no onnxruntime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["Feed", "InspectResult"]

Feed = Mapping[str, np.ndarray]  # input name -> [n, ...], one row per window; every array has the same n


@dataclass(frozen=True)
class InspectResult:
    """Outputs of inspect.onnx for a batch of windows (N layers, Hh heads)."""

    forecast: np.ndarray  # [batch, H, C]
    softmax: np.ndarray  # [batch, C, N, Hh, L, L]
    rem: np.ndarray  # [N, Hh, L, L]
    mixed: np.ndarray  # [batch, C, N, Hh, L, L]
