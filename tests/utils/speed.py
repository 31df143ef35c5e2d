"""How slow this machine is right now, for the few tests whose verdict holds a time.

A bound in seconds (a deadline the service must meet, a drain window a client must use) is written for a
quiet machine; on a busy one (other test runs, a CPU hog, CI's neighbours) the same code takes longer,
and a fixed bound fails with nothing wrong. `scaled(seconds)` stretches such a bound by `slowdown()`: how
many times longer a fixed CPU workload takes now than on the quiet reference machine. A real regression
(a request answered a whole deadline late, a second grace period) still fails, because the bound only
grows with the measured slowness, never below what the quiet machine allows.

Measured once per session, at its first use, as the median of a few runs (a run's own noise is its
scheduler's quantum); the figure is printed at the end of the session (tests/conftest.py).
"""

from __future__ import annotations

import json
import statistics
import time
from functools import cache

import numpy as np

# The workload's time on the quiet reference machine: the 2-core development box, the fastest of 30 runs
# (2026-11-27; 0.0295-0.0306 s). A faster machine reads as 1.0: bounds never tighten.
REFERENCE_S = 0.030
RUNS = 5
MAX_SLOWDOWN = 10.0  # past this the machine is not busy but broken; a bound stretched further means nothing


def _workload() -> float:
    """About 30 ms of single-threaded work of the kinds the service does: Python objects and JSON (an
    event loop, a request parser), then small numpy arrays (a batch of windows)."""
    rows = [{"id": str(i), "values": [float(i + j) for j in range(24)]} for i in range(2000)]
    back = json.loads(json.dumps(rows))
    total = sum(sum(r["values"]) for r in back)
    a = np.arange(64 * 96 * 7, dtype=np.float32).reshape(64, 96, 7)
    for _ in range(60):
        a = (a - a.mean(axis=1, keepdims=True)) / (a.std(axis=1, keepdims=True) + 1.0)
    return total + float(a.sum())


@cache
def slowdown() -> float:
    """How many times slower than the quiet reference this machine runs the workload now, in [1, 10]."""
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        _workload()
        times.append(time.perf_counter() - t0)
    return min(MAX_SLOWDOWN, max(1.0, statistics.median(times) / REFERENCE_S))


def scaled(seconds: float) -> float:
    """A time bound written for the quiet machine, stretched by how slow this one is now."""
    return seconds * slowdown()


def measured() -> bool:
    """Whether this session has measured the machine (some test asked for a scaled bound)."""
    return slowdown.cache_info().currsize > 0
