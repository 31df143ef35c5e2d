"""The last L values of each series as a model reads them: right-aligned (its last value last), the steps
before a shorter series' first value filled with `before` (NaN: not observed; the served graph and the
local models mask them). One rule for the exporter's graphs and parity checks, the service's refit, the
read-out's fit and the client's requests, whether the series come as a list of arrays (`tail_windows`) or
laid end to end in one long array (`right_aligned`, the client's frames)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

__all__ = ["right_aligned", "tail_windows"]


def tail_windows(
    histories: Sequence[ArrayLike], length: int, before: float = np.nan, dtype: DTypeLike = np.float64
) -> np.ndarray:
    """[S, length] of `dtype`: each history's last `length` values (read as float64), right-aligned;
    `before` in the steps before a shorter history's first value."""
    out = np.full((len(histories), length), before, dtype=dtype)
    for i, h in enumerate(histories):
        tail = np.asarray(h, dtype=np.float64)[-length:]
        out[i, length - len(tail) :] = tail
    return out


def right_aligned(
    values: np.ndarray, begins: np.ndarray, ends: np.ndarray, length: int, before: float
) -> np.ndarray:
    """[S, length, ...] float32: the last `length` rows of each series of `values` (series i: rows
    begins[i] .. ends[i] - 1, laid end to end), its last row last; `before` in the steps before a shorter
    series' first row."""
    rows = ends[:, None] - length + np.arange(length)  # [S, L] row positions of each last window
    outside = rows < begins[:, None]
    out = values[np.maximum(rows, 0)].astype(np.float32)
    out[outside] = before
    return out
