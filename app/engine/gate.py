"""The process-wide gate between CUDA graph captures and every other CUDA call of the process.

Its own module: session creation (app/engine/session.py), the runners and the inspection session all take
it, and it depends on nothing of theirs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from app.engine.providers import CUDA


class CaptureGate:
    """Process-wide: a CUDA graph capture runs with no other CUDA work in the process.

    ONNX Runtime's CUDA provider captures in `cudaStreamCaptureModeGlobal`: while a capture is under
    way, a synchronous CUDA call from any other thread (`cudaMalloc`, `cudaMemcpy`,
    `cudaStreamSynchronize`: every copy, another version's call, a session being created) fails that
    capture with error 900. So every CUDA call of this process (`call()`: runners, session creation, the
    inspection session) holds the gate shared, and a graph runner's capturing warm-up holds it alone
    (`capture()`), waiting for the calls in flight and holding new ones back. Captures happen only in
    warm-up, at load, so serving calls never wait on one afterwards. The thread holding `capture()` may
    make calls itself (its own runs), and a call within a call on one thread (a session made while the
    gate is held) never waits: it could wait for a capture that waits for it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._calls = 0  # threads inside call()
        self._capturing: int | None = None  # the thread that holds capture()
        self._waiting = 0  # captures waiting: new calls wait behind them
        self._depth = threading.local()  # call() within call() on one thread: counted once, never waits

    @contextmanager
    def call(self) -> Iterator[None]:
        depth = getattr(self._depth, "n", 0)
        if depth or self._capturing == threading.get_ident():  # nested, or the capturing thread's runs
            self._depth.n = depth + 1
            try:
                yield
            finally:
                self._depth.n = depth
            return
        with self._cond:
            self._cond.wait_for(lambda: self._capturing is None and self._waiting == 0)
            self._calls += 1
        self._depth.n = 1
        try:
            yield
        finally:
            self._depth.n = 0
            with self._cond:
                self._calls -= 1
                self._cond.notify_all()

    @contextmanager
    def capture(self) -> Iterator[None]:
        me = threading.get_ident()
        if getattr(self._depth, "n", 0):  # it would wait for its own call forever
            raise RuntimeError("a CUDA graph capture cannot start inside a CUDA call of the same thread")
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: self._capturing is None and self._calls == 0)
            self._waiting -= 1
            self._capturing = me
        try:
            yield
        finally:
            with self._cond:
                self._capturing = None
                self._cond.notify_all()


CUDA_GATE = CaptureGate()


def cuda_call(provider: str) -> AbstractContextManager[None]:
    """The gate's shared side for work on the CUDA provider; nothing for the CPU's."""
    return CUDA_GATE.call() if provider == CUDA else nullcontext()
