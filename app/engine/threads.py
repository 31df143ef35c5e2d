"""Blocking file work with a deadline: each call in a thread of its own, given up on when it is late.

A read can block for ever (a hung network mount, a FIFO where a file should be) and cannot be interrupted
from Python. `OwnThreads.call` runs one such call (reading a model's folder, creating its sessions) in a
daemon thread of its own, so a hung one never holds a pool's thread, a lock, or the interpreter's exit.
Past its deadline the caller gets `DeadlineExceeded` at once; the thread is left to finish, and what it
returns then is handed to `cleanup` (a late session is closed). `abandoned` counts the calls given up on
and still running: the engine counts them against its bound on loaded versions, so hung reads cannot pile
up threads without limit.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


class DeadlineExceeded(Exception):  # noqa: N818  (a reason, not an error class of the service)
    """The call did not return within its time; it goes on in its thread and is cleaned up when it does."""


class OwnThreads:
    def __init__(self, name: str) -> None:
        self.name = name
        self.abandoned = 0  # calls given up on whose thread still runs (read and written on the loop)

    async def call(
        self,
        fn: Callable[..., T],
        *args: Any,
        timeout_s: float,
        what: str,
        cleanup: Callable[[T], object] | None = None,
    ) -> T:
        """`fn(*args)` in a new daemon thread; its result, or its exception, within `timeout_s`, else
        DeadlineExceeded. A cancelled caller gives the call up just the same."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def deliver(result: Any, error: BaseException | None) -> None:  # on the loop: no race with giving up
            if not future.done():
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(result)
                return
            self.abandoned -= 1
            logger.warning("%s returned after its deadline%s", what, f": {error}" if error else "; freed")
            if error is None and cleanup is not None:
                _safely(cleanup, result, what)

        def work() -> None:
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the caller
                error = exc
            try:
                loop.call_soon_threadsafe(deliver, result, error)
            except RuntimeError:  # the loop is closed: nobody waits any more
                if error is None and cleanup is not None:
                    _safely(cleanup, result, what)

        threading.Thread(target=work, name=self.name, daemon=True).start()
        try:
            done, _ = await asyncio.wait({future}, timeout=max(0.0, timeout_s))
        except asyncio.CancelledError:
            self._give_up(future)
            raise
        if not done:
            self._give_up(future)
            raise DeadlineExceeded(f"{what} took longer than {timeout_s:g} s")
        return future.result()

    def _give_up(self, future: asyncio.Future[Any]) -> None:
        if not future.done():
            future.cancel()
            self.abandoned += 1


def _safely(cleanup: Callable[[Any], object], result: Any, what: str) -> None:
    try:
        cleanup(result)
    except Exception:
        logger.exception("freeing what %s returned late failed", what)


class NamedLocks:
    """One asyncio lock per name (a model's loads and unloads, one at a time), dropped once nobody holds
    or waits for it, so names that were only asked about leave nothing behind."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, name: str, timeout_s: float, what: str) -> AsyncIterator[None]:
        """The name's lock, waited for at most `timeout_s` (DeadlineExceeded naming `what` after)."""
        lock, users = self._locks.get(name, (asyncio.Lock(), 0))
        self._locks[name] = (lock, users + 1)
        try:
            acquire = asyncio.ensure_future(lock.acquire())
            try:
                wait_s = None if math.isinf(timeout_s) else max(0.0, timeout_s)
                done, _ = await asyncio.wait({acquire}, timeout=wait_s)
            except asyncio.CancelledError:
                _drop(acquire, lock)
                raise
            if not done:
                _drop(acquire, lock)
                raise DeadlineExceeded(f"{what} did not start within {timeout_s:g} s")
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[name]
            if users == 1:
                del self._locks[name]
            else:
                self._locks[name] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


def _drop(acquire: asyncio.Future[Literal[True]], lock: asyncio.Lock) -> None:
    """Give up waiting for `lock`, releasing it should the wait have just got it."""
    if acquire.done():
        if not acquire.cancelled() and acquire.exception() is None:
            lock.release()
        return
    acquire.cancel()
