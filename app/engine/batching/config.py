"""A batcher's configuration (`BatcherConfig`) and what it calls (`BatchRunner`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.engine.types import Feed


class BatchRunner(Protocol):
    """What the batcher calls (app/engine/runners.py's Runner): blocking, off the loop except inline."""

    def run(self, feed: Feed, alone: bool = False) -> np.ndarray:
        """The outputs [n, ...] of a feed of n rows. `alone`: an inline call, with the machine to itself."""
        ...

    def release_memory(self) -> object:
        """Give back what can be given back once the version is idle."""
        ...


@dataclass(frozen=True)
class BatcherConfig:
    name: str  # for logs and errors: model/version
    max_batch_rows: int  # rows per session call at most
    max_wait_s: float  # how long the oldest queued request waits for others to join
    max_queue_rows: int  # the queue's hard bound
    retry_after_s: int = 1  # the Retry-After of a refusal by the queue's bound or a stop
    release_after_s: float | None = None  # idle time before the runner's memory is released; None: never
    inline_max_rows: int = 0  # requests of at most this many rows may run inline (0: never)
    max_calls: int = 1  # session calls at once
    concurrent_max_rows: int = 0  # rows of a call that may run beside others
    row_seconds: float | None = None  # the drain rate's seed (seconds per row of a full call, timed at load)
    call_rows: float = 0.0  # a call's fixed cost, in rows' worth (timed at load; DrainRate)
    max_evaluations: int = 2  # evaluation requests waiting or running at once (RSA_MAX_EVALUATIONS_IN_FLIGHT)
    evaluation_call_rows: int = 64  # evaluation rows per session call at most (RSA_EVALUATION_CALL_ROWS)
    # The evaluation drain rate's seed (seconds per evaluation row through its queue); None: the forecasts'
    # rate until an evaluation chunk is measured.
    evaluation_row_seconds: float | None = None

    @property
    def evaluation_rows_per_call(self) -> int:
        """Evaluation rows per session call at most: its chunk, within the calls' bound."""
        return min(self.evaluation_call_rows, self.max_batch_rows)

    def __post_init__(self) -> None:
        if (
            min(
                self.max_batch_rows,
                self.max_queue_rows,
                self.max_calls,
                self.max_evaluations,
                self.evaluation_call_rows,
            )
            < 1
            or min(
                self.max_wait_s, self.release_after_s or 0.0, self.inline_max_rows, self.concurrent_max_rows
            )
            < 0
        ):
            raise ValueError(
                "max_batch_rows, max_queue_rows, max_calls, max_evaluations and evaluation_call_rows must "
                "be >= 1; max_wait_s, release_after_s, inline_max_rows and concurrent_max_rows >= 0"
            )
