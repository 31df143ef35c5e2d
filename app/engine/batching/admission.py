"""Admission control: who may come into a version's queue, judged on time and on room.

The batcher measures how fast it drains rows (`DrainRate`: an EWMA of seconds per row of a full call
over back-to-back calls, so the time between calls counts too; seeded by the caller, e.g. calls timed at
load), and a request whose rows could not be through the session before its deadline is refused at once
(Overloaded, with a Retry-After of the time the backlog needs): a fast 503 the client can retry
elsewhere, rather than a 504 after waiting for nothing. Every admitted row counts until it is answered:
queued, running, or reserved (`Admission.reserve`) by a request admitted before its body was read and
parsed. An idle version admits any request; `max_queue_rows` stays as a hard bound on memory.
"""

from __future__ import annotations

import itertools
import logging
import math
from time import perf_counter
from typing import NoReturn

from app.core.errors import Overloaded
from app.engine.batching.items import BatcherStats

# Admit a request only if its rows are predicted through the session within this share of its remaining
# time: the rest absorbs the drain rate's jitter and the answer's encoding. Filling the queue up to the
# whole deadline made admitted requests miss it (measured: 504s, goodput 71% of the best); at 0.75, 1% of
# the answers were still 504s on a busy machine. The queue still never runs dry, so goodput holds.
ADMIT_FRACTION = 0.6
# A refusal by the time rule is logged (WARNING) at most this often per version: what it was judged on.
REFUSAL_LOG_EVERY_S = 10.0

logger = logging.getLogger(__name__)


def late_refusal(
    name: str,
    ahead: int,
    n: int,
    row_seconds: float | None,
    timeout_s: float,
    *,
    waiting: str = "series",
    busy: str = "overloaded",
) -> Overloaded | None:
    """The refusal of `n` more rows that could not be through the session within `timeout_s` behind
    `ahead` rows at `row_seconds` each; None when they can. An idle version takes any request, so a request
    is never refused for its size alone. (The batcher's rule, for forecasts and, at their own rate, for
    evaluation work behind evaluation work (evaluation.py); a front end applies it to the backlog the
    engine last reported, app/engine/client.py.) `waiting` and `busy` name the rows ahead and the
    version's state in the message."""
    if not ahead or row_seconds is None or (ahead + n) * row_seconds <= ADMIT_FRACTION * timeout_s:
        return None
    drain_s = ahead * row_seconds
    return Overloaded(
        f"model {name} is {busy}: {ahead} {waiting} ahead need about {drain_s:.2f}s, too much of the "
        f"{timeout_s:.2f}s this request has left (at most {ADMIT_FRACTION:.0%} of it is queued for); "
        "retry later",
        retry_after_s=max(1, math.ceil(drain_s)),
    )


class DrainRate:
    """Seconds per row the session drains a backlog at (`row_seconds`): per row of a full call
    (`full_rows`), as a backlog is drained; from the end of the previous call when calls ran back to back
    or side by side (the time between the ends is what the rows cost the queue), else the call alone;
    smoothed (EWMA). None until measured or seeded.

    A call's cost is affine in its rows: a fixed part worth `call_rows` rows, then the rows. Each call
    observed is scaled to a full call by that shape (timed at load: app/engine/host.py). On a GPU a call of
    one row costs about what a full one does (H200, bench.runners, 2026-12-04: 0.88 ms at 1 row, 2.4 ms at
    256, the shipped v1), so seconds per row of small calls, the rule before, overstated a backlog by up to
    two orders. (In the GPU lane's first run the service refused 256-series requests it answers in 2-5 ms,
    judged at 11-16 ms a series; what made the rate that high is not known: docs/gpu.md.)
    With `call_rows` 0 (the CPU, nearly) it is seconds per row of each call."""

    def __init__(self, seed: float | None, call_rows: float = 0.0, full_rows: int = 1) -> None:
        self.row_seconds = seed
        self.call_rows = call_rows
        self.full_rows = full_rows
        self._busy_since: float | None = None  # end of the last call, while calls run back to back

    def observe(self, start: float, end: float, rows: int, still_busy: bool) -> None:
        """A call of `rows` rows ran from `start` to `end`; `still_busy`: more work was queued or running."""
        begin = start if self._busy_since is None else self._busy_since
        # the call's cost at the observed shape, scaled to one row of a full call
        seconds = (
            (end - begin) * (self.full_rows + self.call_rows) / (self.full_rows * (rows + self.call_rows))
        )
        self.row_seconds = seconds if self.row_seconds is None else 0.7 * self.row_seconds + 0.3 * seconds
        self._busy_since = end if still_busy else None


class Admission:
    """Admission to one version: the time rule (`late_refusal` at the measured `drain`), the queue's bound,
    and the reservations of requests whose body is still being read. The rows in flight (queued and
    running) are the batcher's; it passes them in. Refusals are counted in `stats.rejected_items`."""

    def __init__(
        self, name: str, max_queue_rows: int, retry_after_s: int, drain: DrainRate, stats: BatcherStats
    ) -> None:
        self.name = name
        self.max_queue_rows = max_queue_rows
        self.retry_after_s = retry_after_s
        self.drain = drain
        self.stats = stats
        # Rows of requests whose body is being read and parsed (`reserve`): id -> (rows, expiry, arrival)
        self._reserved: dict[int, tuple[int, float, float | None]] = {}
        self._reserved_rows = 0
        self._ids = itertools.count(1)
        self._logged_at = -math.inf  # the last refusal logged

    def ahead(self, in_flight: int) -> int:
        """Rows admitted and not yet answered: `in_flight` (queued and running) and the reserved rows."""
        self._expire()
        return in_flight + self._reserved_rows

    def ahead_of(self, since: float, in_flight: int) -> int:
        """Rows admitted before a request that arrived at `since`."""
        self._expire()
        earlier = sum(
            rows for rows, _, arrived in self._reserved.values() if arrived is None or arrived <= since
        )
        return in_flight + earlier

    def in_time(self, n: int, timeout_s: float, ahead: int) -> None:
        """Raise Overloaded unless `n` more rows behind `ahead` can be through within `timeout_s`."""
        refusal = late_refusal(self.name, ahead, n, self.drain.row_seconds, timeout_s)
        if refusal is not None:
            self.stats.rejected_items += 1
            now = perf_counter()
            if now - self._logged_at >= REFUSAL_LOG_EVERY_S:
                self._logged_at = now
                logger.warning(
                    "%s: refused %d rows behind %d (%d of them reserved by bodies still being read) at %.4g "
                    "ms a row of a full call of %d (a call's fixed cost: %.3g rows' worth); %d refused",
                    self.name,
                    n,
                    ahead,
                    self._reserved_rows,
                    1e3 * (self.drain.row_seconds or 0.0),
                    self.drain.full_rows,
                    self.drain.call_rows,
                    self.stats.rejected_items,
                )
            raise refusal

    def to_queue(self, n: int, queued: int) -> None:
        """The queue's hard bound on memory, whatever was reserved."""
        if queued and queued + n > self.max_queue_rows:
            self.over_limit(
                f"model {self.name} is overloaded: {queued} series queued, "
                f"{n} more would pass the limit of {self.max_queue_rows}; retry later",
                self.max_queue_rows,
            )

    def over_limit(self, message: str, limit: int) -> NoReturn:
        """Refuse a request over one of the version's bounds (`limit`: the queue's rows, the evaluations
        in flight): counted, Overloaded with the configured Retry-After."""
        self.stats.rejected_items += 1
        raise Overloaded(message, limit=limit, retry_after_s=self.retry_after_s)

    def reserve(self, n: int, timeout_s: float, since: float | None, in_flight: int) -> int:
        """Judge `n` rows (an estimate) on time only (the queue's bound is on the rows really sent), then
        count them until released or `timeout_s` passes; returns the reservation's key. With `since`,
        judged behind the work admitted before that arrival only (see DynamicBatcher.reserve)."""
        ahead = self.ahead(in_flight) if since is None else self.ahead_of(since, in_flight)
        self.in_time(n, timeout_s, ahead)
        key = next(self._ids)
        self._reserved[key] = (n, perf_counter() + timeout_s, since)
        self._reserved_rows += n
        return key

    def release(self, key: int) -> int:
        """The reservation's rows stop counting (0 when it was already gone); returns them."""
        entry = self._reserved.pop(key, None)
        if entry is None:
            return 0
        self._reserved_rows -= entry[0]
        return entry[0]

    def clear(self) -> None:
        self._reserved.clear()
        self._reserved_rows = 0

    def _expire(self) -> None:
        if self._reserved:
            now = perf_counter()
            for key in [k for k, (_, expiry, _) in self._reserved.items() if expiry <= now]:
                self.release(key)
