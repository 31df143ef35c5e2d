"""What the batcher queues and runs: a request (`WorkItem`), its rows placed in a call (`Segment`), one
session call (`Batch`), and the counters of them (`BatcherStats`). Stamps are time.perf_counter()
seconds."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from app.engine.types import Feed, feed_rows


@dataclass(eq=False)
class WorkItem:
    """One submitted request."""

    inputs: Feed  # the request's inputs, one row per series in every array
    future: asyncio.Future[np.ndarray]
    deadline: float
    t_enqueued: float
    t_dispatched: float | None = None  # its first rows went into a batch
    next_row: int = 0  # rows before this index are dispatched
    rows_pending: int = 0  # rows not yet returned
    output: np.ndarray | None = None
    session_calls: int = 0  # >1 when the request was split
    # Evaluation work (a backtest's or an anomaly check's windows): its own queue and admission, run in
    # chunks after the forecasts waiting (app/engine/batching/batcher.py)
    evaluation: bool = False
    n_rows: int = field(init=False)

    def __post_init__(self) -> None:
        self.n_rows = feed_rows(self.inputs)  # also checks that every input has one row per series
        self.rows_pending = self.n_rows

    def slice(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Rows [start, stop) of every input."""
        return {name: array[start:stop] for name, array in self.inputs.items()}

    @property
    def queue_wait_s(self) -> float | None:
        return None if self.t_dispatched is None else self.t_dispatched - self.t_enqueued


@dataclass(frozen=True)
class Segment:
    """Rows [start, stop) of one item, placed in a batch."""

    item: WorkItem
    start: int
    stop: int


@dataclass(eq=False)
class Batch:
    """One session call."""

    segments: list[Segment]
    rows: int
    t_run_start: float | None = None
    t_run_end: float | None = None
    error: BaseException | None = None
    evaluation: bool = False  # a chunk of evaluation work
    urgent: bool = False  # evaluation behind its deadline's pace: at the service's priority

    @property
    def run_s(self) -> float | None:
        if self.t_run_start is None or self.t_run_end is None:
            return None
        return self.t_run_end - self.t_run_start

    def feed(self) -> dict[str, np.ndarray]:
        """One feed from the segments, each input concatenated in segment order."""
        if len(self.segments) == 1:
            seg = self.segments[0]
            return seg.item.slice(seg.start, seg.stop)
        parts = [seg.item.slice(seg.start, seg.stop) for seg in self.segments]
        names = parts[0].keys()
        if any(part.keys() != names for part in parts):  # one version's requests all carry the same inputs
            raise ValueError(f"requests in one batch carry different inputs: {[sorted(p) for p in parts]}")
        return {name: np.concatenate([part[name] for part in parts], axis=0) for name in parts[0]}


@dataclass
class BatcherStats:
    session_calls: int = 0
    rows: int = 0  # rows sent to the session
    failed_calls: int = 0
    rejected_items: int = 0  # refused with Overloaded
    expired_items: int = 0  # deadline passed before reaching the session
    dropped_items: int = 0  # cancelled by the caller (timeout, disconnect) before reaching the session
    batch_rows: Counter[int] = field(default_factory=Counter)  # rows per session call -> calls
