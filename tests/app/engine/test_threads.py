"""Blocking work with a deadline (app/engine/threads.py): a call given up on is counted and cleaned up when
it returns; per-name locks time out, survive cancellation, and leave nothing behind."""

from __future__ import annotations

import asyncio
import threading

import pytest

from app.engine.threads import DeadlineExceeded, NamedLocks, OwnThreads


def test_a_late_call_is_given_up_counted_and_its_result_cleaned_up() -> None:
    gate = threading.Event()
    freed: list[str] = []

    async def scenario() -> None:
        threads = OwnThreads("test")
        assert await threads.call(lambda x: x + 1, 1, timeout_s=60, what="quick") == 2
        with pytest.raises(ValueError, match="boom"):
            await threads.call(_raise, timeout_s=60, what="failing")
        # the gate stays shut until after the deadline: the verdict needs no timing
        with pytest.raises(DeadlineExceeded, match="blocked took longer than"):
            await threads.call(
                lambda: (gate.wait(60), "built")[1], timeout_s=0.05, what="blocked", cleanup=freed.append
            )
        assert threads.abandoned == 1 and freed == []
        gate.set()
        for _ in range(6000):  # hang guard only
            if threads.abandoned == 0:
                break
            await asyncio.sleep(0.01)
        assert threads.abandoned == 0 and freed == ["built"]

    try:
        asyncio.run(asyncio.wait_for(scenario(), 120))
    finally:
        gate.set()


def _raise() -> None:
    raise ValueError("boom")


def test_named_locks_time_out_survive_cancellation_and_are_dropped() -> None:
    async def scenario() -> None:
        locks = NamedLocks()
        async with locks.hold("a", 60, "first"):
            with pytest.raises(DeadlineExceeded, match="second did not start"):
                async with locks.hold("a", 0.01, "second"):
                    raise AssertionError("held twice")
            waiter = asyncio.ensure_future(_enter(locks, "a"))
            await asyncio.sleep(0.01)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            async with locks.hold("b", 60, "other name"):  # another name is never held up
                pass
        async with locks.hold("a", 60, "after"):  # released, and not leaked by the cancelled waiter
            pass
        assert len(locks) == 0

    asyncio.run(asyncio.wait_for(scenario(), 60))


async def _enter(locks: NamedLocks, name: str) -> None:
    async with locks.hold(name, 60, "waiter"):
        pass
