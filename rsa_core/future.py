"""A future table's rows of one series checked against the steps a forecast reads: the one rule by which
the exporter (`export.panel forecast --future-file`), the batch scorer (`--future`) and the client (`X_df`)
accept a covariate model's future values. A series' rows must be exactly the steps after its last
timestamp (`rsa_core.steps.steps_after`), in order: no row missing, none extra, none elsewhere. Each path
says what is wrong in its own words (a file's line, a table's row, a frame's series)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["FutureProblem", "future_rows_problem"]


@dataclass(frozen=True)
class FutureProblem:
    """What is wrong with one series' future rows: `missing` (no row at all), `count` (`rows` rows where
    the forecast reads another number), or `row` (row `row`, counted from 0, is not at its step)."""

    kind: Literal["missing", "count", "row"]
    rows: int
    row: int = -1


def future_rows_problem(stamps: np.ndarray | None, want: np.ndarray) -> FutureProblem | None:
    """None when `stamps` (one series' future rows, in order; None: the series has none) are exactly
    `want` (the steps after its last timestamp, of the same kind: datetime64 or int64 instants), else
    the first problem."""
    if stamps is None or not len(stamps):
        return FutureProblem("missing", 0)
    if len(stamps) != len(want):
        return FutureProblem("count", len(stamps))
    wrong = np.flatnonzero(np.asarray(stamps) != np.asarray(want))
    if len(wrong):
        return FutureProblem("row", len(stamps), int(wrong[0]))
    return None
