"""What the evaluation tests share (tests/app/engine/test_evaluation_queue.py and test_evaluation_cost.py):
a batcher configured for evaluation work, rows tagged by kind, a gated runner, and bounded waits."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np

from app.engine.batching import BatcherConfig, DynamicBatcher
from tests.utils.batching import FnRunner


class Gated:
    """A runner that records each call's rows (tagged by the sign of their values: evaluation rows are
    negative) and blocks every call until `open` is set."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def __call__(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        x = feed["x"]
        with self.lock:
            kinds = {"evaluation" if v < 0 else "forecast" for v in x[:, 0]}
            self.calls.append(("+".join(sorted(kinds)), len(x)))
        assert self.open.wait(10)
        return x * 2.0


def evaluation_batcher(run: Any, **config: Any) -> DynamicBatcher:
    """A batcher over `run(feed)`: 64 rows a call, no wait, 2 evaluations in flight, chunks of 8 rows;
    `config` overrides any BatcherConfig field."""
    options: dict[str, Any] = {
        "name": "t",
        "max_batch_rows": 64,
        "max_wait_s": 0.0,
        "max_queue_rows": 10_000,
        "max_evaluations": 2,
        "evaluation_call_rows": 8,
    }
    options.update(config)
    return DynamicBatcher(FnRunner(run), BatcherConfig(**options))


def forecast_rows(n: int, start: int = 1) -> dict[str, np.ndarray]:
    return {"x": np.arange(start, start + n, dtype=np.float32).reshape(n, 1)}


def evaluation_rows(n: int) -> dict[str, np.ndarray]:
    return {"x": -np.arange(1, n + 1, dtype=np.float32).reshape(n, 1)}


async def until(predicate: Any) -> None:
    for _ in range(2000):  # bounded: 2,000 loop passes of 1 ms
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


def run_scenario(scenario: Any) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 20))
