"""The inline gate: when a small request may run on the event loop's own thread.

A request of at most `max_rows` rows that finds the batcher idle (nothing queued, nothing running) and
`when()` true runs at once on the caller's thread, the event loop, without the two thread hops (121 us
measured here) of the executor path: there was nothing to batch it with, and the loop is held for a small
call's time only (under a millisecond for one row of the shipped model). The service passes "no other
request in flight" (the engine process: no other submit being handled).

A request still unread on another connection is in no count yet, so the gate first lets the loop run
LOOK_PASSES times: a request that arrived meanwhile needs three to be counted, its socket polled (the
server creates its task), its task's first step (the request is counted in flight), and ours after it.
Without that wait, at concurrency 16 every request ran inline (all 5,562 calls of a run were of one row,
the loop thread at 100%, the executor idle): the loop read, ran and answered one request at a time, and
nothing overlapped. (The gate used to ask asyncio's private selector and ready queue instead; the passes
use only public asyncio and cost a few loop iterations per candidate: 6-10 us more than the selector's
1-2 us on an idle loop, measured here, within the noise of bench.serving's single-window p50 of 0.9 ms
on a busy 2-core machine.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

LOOK_PASSES = 3


class InlineGate:
    """`max_rows` 0: never inline. `when()`: whether nothing else is in flight now."""

    def __init__(self, max_rows: int, when: Callable[[], bool]) -> None:
        self.max_rows = max_rows
        self.when = when

    async def allows(self, rows: int, idle: Callable[[], bool]) -> bool:
        """Whether a request of `rows` rows runs inline, `idle()` being the batcher's state (asked before
        and after the loop passes)."""
        if rows > self.max_rows or not (idle() and self.when()):
            return False
        for _ in range(LOOK_PASSES):
            await asyncio.sleep(0)
        return idle() and self.when()
