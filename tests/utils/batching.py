"""Batcher test helpers: a runner from a plain function, and an observer that records what it sees."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.engine.batching import DynamicBatcher
from app.engine.types import BatchEvent, Feed


class FnRunner:
    """A batch runner (app/engine/batching's BatchRunner) whose every call, inline or not, is `fn(feed)`;
    `release`: what releasing memory does (nothing when None)."""

    def __init__(self, fn: Callable[[Feed], np.ndarray], release: Callable[[], object] | None = None) -> None:
        self.fn = fn
        self.release = release

    def run(self, feed: Feed, alone: bool = False) -> np.ndarray:
        return self.fn(feed)

    def release_memory(self) -> object:
        return None if self.release is None else self.release()


def replace_run(batcher: DynamicBatcher, fn: Callable[[Feed], np.ndarray]) -> None:
    """Every session call of the batcher (inline ones too) becomes `fn(feed)`; memory is released as
    before."""
    batcher.runner = FnRunner(fn, batcher.runner.release_memory)


class Recorder:
    """A version observer that keeps every event."""

    def __init__(self) -> None:
        self.batches: list[BatchEvent] = []
        self.waits: list[float] = []
        self.retries: list[str] = []

    def on_batch(self, event: BatchEvent) -> None:
        self.batches.append(event)

    def on_queue_wait(self, seconds: float) -> None:
        self.waits.append(seconds)

    def on_retry(self, reason: str) -> None:
        self.retries.append(reason)
