"""Where fits on request run (fit_forecast, a backtest's refits): worker processes at a lower CPU priority,
so that forecasts keep their latency while fits run (issue 46, item 6).

A fit is seconds of numpy work. In a thread of the service's process it competed with the session calls
and the event loop for the cores and, in its Python parts, for the GIL; a thread's niceness cannot help
with the GIL (a low-priority thread holding it stalls the event loop), and `os.nice` is process-wide. So
fits run in spawned worker processes (not forked: the service holds ONNX Runtime's threads), each at
FIT_NICENESS above the service: the kernel gives the service's threads the cores first, and a fit the
rest. One worker per fit slot (RSA_MAX_FITS_IN_FLIGHT, by default the CPUs this process may use), spawned
on first use. A worker dies with the service (PR_SET_PDEATHSIG) and ignores the signals the service
drains on. A host without process pools (no /dev/shm semaphores), or a pool that broke (a worker
killed), runs fits in a thread, as before.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from app.core.config import usable_cpus
from app.core.process import die_with_parent

__all__ = ["FIT_NICENESS", "FitPool", "fit_pool", "niceness", "usable_cpus"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

# Niceness a fit worker adds to the service's: at +10 the kernel's CFS weighs it at 110 against a
# nice-0 thread's 1024, so a busy service keeps about 90% of a contended core. +19 was tried (issue 46,
# `nice -n 5 python -m bench.fairness --rounds 2 --phase-s 20 --probes 150`, load 12-14): forecasts' p99
# under eight looping fits 55 ms against 69-75 ms at +10, but 2.9x the median idle p99 against 2.5x (the
# idle phases moved as much), and on this shared host one fit a phase was stopped at RSA_MAX_FIT_SECONDS
# (none at +10) and 1-3 answered against 3-4: kept at +10. Linux's SCHED_IDLE class on top was tried too
# (2026-12-04, this 2-core host, the bench's stores probe every 50 ms under its eight looping fits, 12 s
# phases, the two alternated): on an otherwise quiet host forecasts' p99 7.1 and 8.3 ms against 10.2 and
# 9.7 ms at +10, beside other jobs (load 2-3) no difference beyond the spread (17-18 against 14-24 ms); but
# beside three nice-0 busy loops tests/app/protocols/test_fit_forecast.py took 183 s and failed a test where
# at +10 it passed in 101 s (its fits starved): not kept.
FIT_NICENESS = 10


def _worker_init(parent: int, niceness: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with_parent(signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)
    os.nice(niceness)


def niceness() -> int:
    """This process's niceness (what a test asks a worker)."""
    return os.nice(0)


class FitPool:
    """`run(fn, *args)`: `fn(*args)` in a niced worker process (a thread when there is none)."""

    def __init__(self, workers: int, niceness: int = FIT_NICENESS) -> None:
        self.workers = workers
        self.niceness = niceness
        self._pool: ProcessPoolExecutor | None = None
        self._failed = False

    def _executor(self) -> ProcessPoolExecutor | None:
        if self._pool is None and not self._failed:
            try:
                self._pool = ProcessPoolExecutor(
                    max_workers=self.workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_worker_init,
                    initargs=(os.getpid(), self.niceness),
                )
            except OSError as exc:
                logger.error("no fit processes (%s); fits run in threads of the service", exc)
                self._failed = True
        return self._pool

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        pool = self._executor()
        if pool is not None:
            try:
                return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
            except BrokenProcessPool:
                logger.error("the fit processes are gone; this fit runs in a thread, the next spawns anew")
                if self._pool is pool:
                    self._pool = None
                    pool.shutdown(wait=False, cancel_futures=True)
        return await asyncio.to_thread(fn, *args)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


_pools: dict[tuple[int, int], FitPool] = {}


def fit_pool(workers: int) -> FitPool:
    """The process's fit pool of `workers` workers (one per setting, made on first use)."""
    key = (os.getpid(), workers)
    pool = _pools.get(key)
    if pool is None:
        pool = _pools[key] = FitPool(workers)
    return pool
