"""A worker process for request parsing: large bodies are decoded there, off the event loop.

Parsing a large JSON body holds the event loop for its whole length (a 256-series forecast: 24 ms), and a
thread cannot take it over, since orjson and numpy keep the GIL while they build the arrays. One spawned
process can: the loop only pays for handing the bytes over and taking the arrays back (pickled), and
health checks, admission and small requests are served meanwhile. Bodies of at least
RSA_PARSE_PROCESS_MIN_BYTES go there; smaller ones are parsed on the loop, where a process hop would cost
more than the parse. The worker starts with the service (spawned, not forked: the parent holds ONNX
Runtime's threads) and stops with it: 22 MB of resident memory idle, 58 MB once it has parsed (74 MB at
its peak on 256-series bodies), beside multiprocessing's 12 MB resource tracker.

The worker dies with its parent, however the parent ends (kill -9 included): the kernel kills it
(PR_SET_PDEATHSIG), and the resource tracker, whose pipe the two held, exits once both are gone. Left to
itself, a worker ignoring SIGTERM would outlive a killed front end for ever, and keep the tracker alive.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from app.core.process import die_with_parent

T = TypeVar("T")

logger = logging.getLogger(__name__)


def _preload(modules: tuple[str, ...]) -> bool:
    for module in modules:
        importlib.import_module(module)
    return True


def _worker_init(parent: int) -> None:
    """The worker's initializer: Ctrl-C or a SIGTERM to the process group is the parent's to handle (it
    drains, then stops the worker); the worker must not die first and fail the requests in flight. It
    dies with the parent instead (SIGKILL from the kernel), or now if the parent is already gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with_parent(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request above was made
        os._exit(1)


class ParseProcess:
    def __init__(self, min_bytes: int) -> None:
        self.min_bytes = min_bytes
        self._pool: ProcessPoolExecutor | None = None
        if min_bytes > 0:
            try:  # its queues need semaphores (/dev/shm): a host without them parses on the loop
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_worker_init,
                    # PR_SET_PDEATHSIG follows the thread that spawned the worker: the pool spawns it
                    # from the thread that submits first, the event loop's, which lives as long as this
                    # process.
                    initargs=(os.getpid(),),
                )
            except OSError as exc:
                logger.error("no parse process (%s); large bodies are parsed on the event loop", exc)

    async def start(self, preload: tuple[str, ...] = ()) -> None:
        """Spawn the worker now and import the `preload` modules (the parsers' own) there, so that the
        first large request waits for neither: imported on first use, they took 0.4 s of CPU in the
        middle of a flood of big bodies, when the cores are busiest."""
        pool = self._pool
        if pool is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(pool, _preload, preload)
        except Exception as exc:  # whatever stopped it, serving goes on without it
            logger.error(
                "the parse process did not start (%s); large bodies are parsed on the event loop", exc
            )
            self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)

    def takes(self, size: int) -> bool:
        return self._pool is not None and size >= self.min_bytes

    async def run(self, fn: Callable[..., T | None], *args: object) -> T | None:
        """`fn(*args)` in the worker (`fn`, its arguments and its result must pickle); None when the
        worker is gone (killed, say, by the OOM killer): from then on every body is parsed on the loop,
        slower for the health checks under load but never a failed request."""
        pool = self._pool
        if pool is None:
            return None
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
        except BrokenProcessPool:
            if self._pool is pool:
                logger.error(
                    "the parse process is gone; large bodies are parsed on the event loop from now on"
                )
                self._pool = None
                pool.shutdown(wait=False, cancel_futures=True)
            return None

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
