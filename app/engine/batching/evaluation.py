"""Evaluation work in a version's batcher: its constants, its niced threads and its admission rule.

Evaluation work (a backtest's or an anomaly check's windows, `submit(..., evaluation=True)`) has its own
queue and its own admission, so that it cannot starve the version's forecasts (issue 46, item 5: six
clients looping 1,024-window backtests got 28 of 45 small forecasts a 503, and p99 from 23 ms to 5.5 s).
At most `max_evaluations` evaluation requests wait or run per version (Overloaded above). Forecasts are
admitted against their own backlog (queued, running and reserved rows: evaluation rows waiting do not
count), evaluation against everything ahead. Evaluation goes out in chunks of `evaluation_call_rows`,
only while no forecast waits or after EVALUATION_EVERY forecast calls in a row (a weighted share, as
Triton's priority levels and vLLM's scheduler give: forecasts first, evaluation never starved), on at most
max_calls - 1 of the calls side by side when several may run: one is always left to forecasts.
Evaluation is admitted on its own drain rate (`evaluation_row_seconds`: seconds per row through its queue,
measured over its chunks while evaluation work waits, so its share, its niceness and the host's load all
count; the forecasts' rate until measured): a request whose rows alone cannot be through within
ADMIT_FRACTION of its time left is refused at once, before it queues (InvalidInput on `EVALUATION_ROWS`
with the rows that would fit: the route names its own field), and one that could alone but not behind
the evaluation work ahead of it gets Overloaded with that work's drain time as Retry-After. A maximal
backtest on a loaded host used to be admitted and answered 504 at the deadline. An admitted request that
falls behind its deadline's pace anyway (the host got busier than measured: its rows left would need
more than URGENT_SHARE of its time left at the rate) is urgent: its chunks run at the service's own
priority, not niced, and take every other call while forecasts wait (forecasts still wait at most one
chunk), until it is back on pace.

The batcher (batcher.py) holds the evaluation queue and schedules its chunks; this module holds what it
reads for them: the share (EVALUATION_EVERY), the niceness and its threads (`evaluation_executor`), the
urgency (URGENT_SHARE) and the refusal of work that cannot be through in time (`evaluation_refusal`).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from app.core.errors import InvalidInput, ServiceError
from app.engine.batching.admission import ADMIT_FRACTION, late_refusal

# While forecasts and evaluation work both wait, one evaluation call after this many forecast calls in a
# row: forecasts keep the version (they wait at most one evaluation chunk), evaluation keeps a share.
EVALUATION_EVERY = 4
# Evaluation chunks run on threads of their own at this niceness above the service's (Linux: a thread's
# own, set with setpriority on its thread id; a session call of a small chunk computes on the calling
# thread): on a busy host the kernel gives the cores to forecasts' calls and the event loop first.
EVALUATION_NICENESS = 10
# The `field` of the refusal of evaluation work too big to be through in its time (InvalidInput, whose
# `limit` is the rows that would fit): the route that submitted it names its own field in its place.
EVALUATION_ROWS = "evaluation_rows"
# An admitted evaluation request is urgent once its rows left, at the evaluation rate, need more than this
# share of its time left (admitted within ADMIT_FRACTION = 0.6, it has fallen behind by a third first).
URGENT_SHARE = 0.8


def _lower_priority() -> None:
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + EVALUATION_NICENESS)
    except (AttributeError, OSError):  # not Linux, or not allowed: the chunks still run, at the same priority
        pass


_evaluation_pool: ThreadPoolExecutor | None = None


def evaluation_executor() -> ThreadPoolExecutor:
    """The process's threads for evaluation chunks (made on first use, one per CPU, each niced once)."""
    global _evaluation_pool
    if _evaluation_pool is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:
            cpus = os.cpu_count() or 1
        _evaluation_pool = ThreadPoolExecutor(
            max_workers=max(1, cpus), thread_name_prefix="rsa-evaluation", initializer=_lower_priority
        )
    return _evaluation_pool


def evaluation_refusal(
    name: str, n: int, timeout_s: float, row_seconds: float | None, ahead: int
) -> ServiceError | None:
    """The refusal of `n` evaluation rows that cannot be through the evaluation queue within
    ADMIT_FRACTION of `timeout_s` at `row_seconds` each: alone (InvalidInput on EVALUATION_ROWS, `limit`
    the rows that would fit), or behind the `ahead` evaluation rows waiting and running (the admission's
    own time rule, `late_refusal`: Overloaded, Retry-After their drain time); None when they can."""
    if row_seconds is None or row_seconds <= 0:
        return None
    budget = ADMIT_FRACTION * timeout_s
    if n * row_seconds > budget:
        fits = int(budget / row_seconds)
        return InvalidInput(
            f"model {name}: {n} windows of evaluation would take about {n * row_seconds:.1f}s at the "
            f"{1000 * row_seconds:.3g} ms a window evaluation work runs at on this host now, more than the "
            f"{budget:.1f}s ({ADMIT_FRACTION:.0%} of the {timeout_s:.1f}s this request has left) it may "
            f"take: refused before it started; {fits} windows would fit",
            field=EVALUATION_ROWS,
            limit=fits,
        )
    return late_refusal(
        name,
        ahead,
        n,
        row_seconds,
        timeout_s,
        waiting="windows of backtests or anomaly checks",
        busy="busy evaluating",
    )
