"""The split-conformal quantile: the one definition the exporter calibrates with (export/conformal.py,
export/global_models/onnx.py) and the service refits with (app/artifacts/readout.py). numpy only."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["conformal_quantile", "level_fits", "windows_needed"]


def conformal_quantile(scores: np.ndarray, level: float) -> np.ndarray:
    """The split-conformal quantile over axis 0 of `scores` [n, ...] at `level` (a fraction): the
    ceil((n + 1)·level)-th smallest score, the largest when that rank passes n (docs/intervals.md)."""
    n = scores.shape[0]
    rank = min(math.ceil((n + 1) * level), n)
    return np.partition(scores, rank - 1, axis=0)[rank - 1]


def level_fits(n: int, level: float) -> bool:
    """Whether n scores calibrate `level` (percent) without the largest standing in for the quantile:
    ceil((n + 1)·level) <= n."""
    return math.ceil((n + 1) * level / 100) <= n


def windows_needed(level: float) -> int:
    """The fewest calibration windows that calibrate `level` (percent, below 100): the least n with
    ceil((n + 1)·level/100) <= n (4 for 80%, 19 for 95%, 99 for 99%)."""
    n = 1
    while not level_fits(n, level):
        n += 1
    return n
