"""Batcher test helpers: a runner from a plain function, an observer that records what it sees, and a small
batcher over one-input feeds with what its tests send through it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from app.engine.batching import BatcherConfig, DynamicBatcher
from app.engine.types import BatchEvent, Feed, VersionObserver


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


def double(rows: np.ndarray) -> np.ndarray:
    return rows * 2.0


def make(run_fn: Callable[[np.ndarray], np.ndarray] = double, **kwargs: Any) -> DynamicBatcher:
    """A batcher over one-input feeds {"x": rows}; `run_fn` sees the rows."""
    return make_feed(lambda feed: run_fn(feed["x"]), **kwargs)


def make_feed(
    run_fn: Callable[[Feed], np.ndarray],
    *,
    release_fn: Callable[[], object] | None = None,
    inline_when: Callable[[], bool] = lambda: True,
    observer: VersionObserver | None = None,
    **config: Any,
) -> DynamicBatcher:
    """`config`: BatcherConfig's fields over small defaults; memory is released (after `release_after_s`,
    1 s by default) only with a `release_fn`."""
    options: dict[str, Any] = {
        "name": "t",
        "max_batch_rows": 64,
        "max_wait_s": 0.01,
        "max_queue_rows": 10_000,
        "release_after_s": None if release_fn is None else 1.0,
    }
    options.update(config)
    runner = FnRunner(run_fn, release_fn)
    return DynamicBatcher(runner, BatcherConfig(**options), observer, alone=inline_when)


async def submit(batcher: DynamicBatcher, x: np.ndarray, timeout_s: float) -> np.ndarray:
    return await batcher.submit({"x": x}, timeout_s)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 20))


def rows(start: int, n: int) -> np.ndarray:
    return np.arange(start, start + n, dtype=np.float32).reshape(n, 1)
