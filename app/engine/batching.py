"""Dynamic batching: concurrent requests for one model version merged into few session calls.

Requests are queued as `WorkItem`s of ROWS (series). A request's inputs are a feed: named arrays that
share their first axis, one row per series (`window`, and `phase` for a model with a seasonal cycle).
The worker waits until `max_batch_rows` rows are queued or the oldest has waited `max_wait_s`, then
concatenates up to `max_batch_rows` rows of every input, runs the session once off the event loop, and
hands each request back exactly its own rows, in order. A request bigger than `max_batch_rows` is split
over several calls, every input sliced alike, so a window never travels without its phase.
No HTTP here: errors are domain errors.

Concurrent calls: up to `max_calls` session calls may run at once, each on its own executor thread, but
only calls of at most `concurrent_max_rows` rows; a bigger call runs alone. On the CPU provider a small
call runs on the single-threaded instance of the graph (app/engine/session.py), so one call keeps
one core busy: two calls at once keep two, where one call at a time left the second core to the event
loop alone and idle half the time (measured at concurrency 16: the whole process at 1.0 core). Queued
small work goes out in calls of at most SHARED_CALL_ROWS rows, which keeps the tail short. A big
call uses every intra-op thread, so it waits for the small ones to finish and they wait for it. As
Triton's instance groups, without a second copy of the weights: an ONNX Runtime session runs calls
from several threads at once.

Admission control: the worker measures how fast it drains rows (an EWMA of seconds per row over
back-to-back batches, so the time between batches counts too; seeded by the caller, e.g. a timed call at
load), and `submit` refuses at once (Overloaded, with a Retry-After of the time the backlog needs) a
request whose rows could not be through the session before its deadline: a fast 503 the client can retry
elsewhere, rather than a 504 after waiting for nothing. Every admitted row counts until it is answered:
queued, running, or reserved (`reserve`) by a request admitted before its body was read and parsed. An
idle batcher admits any request; `max_queue_rows` stays as a hard bound on memory.

Inline calls: a request of at most `inline_max_rows` rows that finds the batcher idle (nothing queued,
nothing running), `inline_when()` true and the event loop with nothing else to do runs `inline_fn` at
once on the caller's thread, the event loop, without the two thread hops (121 us measured here) of the
executor path: there was nothing to batch it with, and the loop is held for a small call's time only
(under a millisecond for one row of the shipped model). The service passes "no other request in
flight"; but a request still unread on another connection is in no count, so the loop's selector is
asked too (`_loop_has_other_work`). Without that question, at concurrency 16 every request ran inline
(all 5,562 calls of a run were of one row, the loop thread at 100%, the executor idle): the loop read,
ran and answered one request at a time, and nothing overlapped.

Memory: after `release_after_s` with nothing queued, once at least one batch ran since the last time,
the worker calls `release_fn` (off the loop, like the session): the session's arena is kept while
requests keep coming, and given back when they stop (`OnnxModel.release_memory`).

Hooks kept for metrics and load tests: every `WorkItem` and `Batch` carries perf_counter stamps per
stage, `BatcherStats` counts calls/rows/rejections, and `on_batch`/`on_item` callbacks see each one.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import selectors
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

from app.core.errors import InferenceError, ModelNotReady, Overloaded, ServiceError, Timeout
from app.engine.types import Feed  # re-exported: runners and tests import it from here

logger = logging.getLogger(__name__)

# Admit a request only if its rows are predicted through the session within this share of its remaining
# time: the rest absorbs the drain rate's jitter and the answer's encoding. Filling the queue up to the
# whole deadline made admitted requests miss it (measured: 504s, goodput 71% of the best); at 0.75, 1% of
# the answers were still 504s on a busy machine. The queue still never runs dry, so goodput holds.
ADMIT_FRACTION = 0.6

# Rows per call while small work is shared out over calls side by side. Measured with the service at
# concurrency 16 and 64, two rounds each (bench.loadgen): calls of at most 4 rows had p99 22.8-23.5 and
# 90-94 ms where calls splitting the queue evenly had 32-36 and 98-134 ms, at the same throughput;
# 8 rows 26-36 and 91-131 ms; 2 rows 80-100 ms at c=64, within the same spread, for twice the hops.
SHARED_CALL_ROWS = 4

# Where the loop's selector cannot be asked (not asyncio's own loop): loop passes an inline candidate
# yields first. A request that arrived on another connection meanwhile needs three to be counted: its
# socket polled (uvicorn creates its task), its task's first step (the request middleware counts it in
# flight), and ours after it.
INLINE_LOOK_PASSES = 3

RunFn = Callable[[Feed], np.ndarray]


@dataclass(eq=False)
class WorkItem:
    """One submitted request. Stamps are time.perf_counter() seconds."""

    inputs: Feed  # the request's inputs, one row per series in every array
    future: asyncio.Future[np.ndarray]
    deadline: float
    t_enqueued: float
    t_dispatched: float | None = None  # its first rows went into a batch
    t_completed: float | None = None  # its last rows came back
    next_row: int = 0  # rows before this index are dispatched
    rows_pending: int = 0  # rows not yet returned
    output: np.ndarray | None = None
    session_calls: int = 0  # >1 when the request was split
    n_rows: int = field(init=False)

    def __post_init__(self) -> None:
        self.n_rows = feed_rows(self.inputs)  # also checks that every input has one row per series
        self.rows_pending = self.n_rows

    def slice(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Rows [start, stop) of every input."""
        return {name: array[start:stop] for name, array in self.inputs.items()}

    @property
    def queue_wait_s(self) -> float | None:
        return None if self.t_dispatched is None else self.t_dispatched - self.t_enqueued

    @property
    def total_s(self) -> float | None:
        return None if self.t_completed is None else self.t_completed - self.t_enqueued


@dataclass(frozen=True)
class Segment:
    """Rows [start, stop) of one item, placed in a batch."""

    item: WorkItem
    start: int
    stop: int


@dataclass(eq=False)
class Batch:
    """One session call."""

    segments: list[Segment]
    rows: int
    t_formed: float
    t_run_start: float | None = None
    t_run_end: float | None = None
    error: BaseException | None = None

    @property
    def run_s(self) -> float | None:
        if self.t_run_start is None or self.t_run_end is None:
            return None
        return self.t_run_end - self.t_run_start


@dataclass
class BatcherStats:
    session_calls: int = 0
    rows: int = 0  # rows sent to the session
    failed_calls: int = 0
    rejected_items: int = 0  # refused with Overloaded
    expired_items: int = 0  # deadline passed before reaching the session
    dropped_items: int = 0  # cancelled by the caller (timeout, disconnect) before reaching the session
    releases: int = 0  # release_fn calls (idle after batches)
    batch_rows: Counter[int] = field(default_factory=Counter)  # rows per session call -> calls


class DynamicBatcher:
    """Queue and flush policy for one model version; `run_fn` is the blocking session call."""

    def __init__(
        self,
        run_fn: RunFn,
        *,
        name: str,
        max_batch_rows: int,
        max_wait_s: float,
        max_queue_rows: int,
        executor: Executor | None = None,
        retry_after_s: int = 1,
        on_batch: Callable[[Batch], None] | None = None,
        on_item: Callable[[WorkItem], None] | None = None,
        release_fn: Callable[[], object] | None = None,
        release_after_s: float = 1.0,
        inline_max_rows: int = 0,
        inline_when: Callable[[], bool] = lambda: True,
        inline_fn: RunFn | None = None,
        max_calls: int = 1,
        concurrent_max_rows: int = 0,
        row_seconds: float | None = None,
    ) -> None:
        if (
            min(max_batch_rows, max_queue_rows, max_calls) < 1
            or min(max_wait_s, release_after_s, inline_max_rows, concurrent_max_rows) < 0
        ):
            raise ValueError(
                "max_batch_rows, max_queue_rows and max_calls must be >= 1; max_wait_s, release_after_s, "
                "inline_max_rows and concurrent_max_rows >= 0"
            )
        self.run_fn = run_fn  # public so tests can wrap it (slow or failing sessions)
        self.name = name
        self.max_batch_rows = max_batch_rows
        self.max_wait_s = max_wait_s
        self.max_queue_rows = max_queue_rows
        self.retry_after_s = retry_after_s
        self.on_batch = on_batch
        self.on_item = on_item
        self.release_fn = release_fn
        self.release_after_s = release_after_s
        self.inline_max_rows = inline_max_rows
        self.inline_when = inline_when
        self.inline_fn = inline_fn  # the session call for inline calls; None: run_fn
        self.max_calls = max_calls
        self.concurrent_max_rows = concurrent_max_rows
        self._ran_since_release = False
        self._releasing = False  # release_fn runs in the executor: no inline call meanwhile
        self.stats = BatcherStats()
        self._executor = executor
        self._queue: deque[WorkItem] = deque()
        self._queued_rows = 0
        self._running_rows = 0  # rows in the session calls under way
        self._calls: set[asyncio.Task[None]] = set()  # the worker's session calls under way
        self._exclusive = False  # a call of more than concurrent_max_rows rows is under way
        # measured drain cost per row (seeded by a timed call at load); None: not known yet
        self.row_seconds: float | None = row_seconds
        # Rows of requests whose body is being read and parsed (`reserve`): id -> (rows, expiry, arrival)
        self._reserved: dict[int, tuple[int, float, float | None]] = {}
        self._reserved_rows = 0
        self._reservation_ids = itertools.count(1)
        self._last_activity = perf_counter()  # a submit, or a call's end
        self._busy_since: float | None = None  # end of the last batch, while batches run back to back
        self._wakeup = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker task on the running event loop."""
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._work(), name=f"batcher:{self.name}")

    async def stop(self, drain_timeout_s: float = 5.0) -> None:
        """Refuse new work, let the worker finish what is queued, then cancel whatever is left."""
        self._closed = True
        self._wakeup.set()
        worker, self._worker = self._worker, None
        if worker is not None:
            try:
                await asyncio.wait_for(asyncio.shield(worker), drain_timeout_s)
            except TimeoutError:
                logger.warning(
                    "batcher %s: queue not drained in %.1fs; cancelling", self.name, drain_timeout_s
                )
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)
                calls = list(self._calls)
                for call in calls:
                    call.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
        while self._queue:
            self._fail(self._queue.popleft(), ModelNotReady(f"model {self.name} is shutting down"))
        self._queued_rows = 0
        self._reserved.clear()
        self._reserved_rows = 0

    @property
    def running(self) -> bool:
        return self._worker is not None and not self._worker.done()

    @property
    def queued_rows(self) -> int:
        return self._queued_rows

    @property
    def ahead_rows(self) -> int:
        """Rows admitted and not yet answered: queued, running, and reserved by requests still parsing."""
        self._expire_reservations()
        return self._queued_rows + self._running_rows + self._reserved_rows

    @property
    def backlog_s(self) -> float:
        """Seconds the session needs for every row admitted and not yet answered, at the measured drain
        rate (0 when nothing waits): the signal to scale replicas on."""
        ahead = self.ahead_rows
        return ahead * self.row_seconds if ahead and self.row_seconds is not None else 0.0

    # -- submitting ------------------------------------------------------------------------------
    def admit(self, n: int, timeout_s: float) -> None:
        """Raise Overloaded unless `n` more rows can be through the session within `timeout_s` and the
        queue has room for them. Called by `submit`, and before a request's body is even read (`reserve`)
        so that a saturated version refuses without paying for the parse."""
        self._admit_in_time(n, timeout_s)
        self._admit_to_queue(n)

    def judge(self, n: int, timeout_s: float) -> None:
        """Raise Overloaded unless `n` more rows could be through the session within `timeout_s`; admit
        nothing (a body's declared size, before its bytes arrive and are reserved)."""
        self._admit_in_time(n, timeout_s)

    def _admit_in_time(self, n: int, timeout_s: float, ahead: int | None = None) -> None:
        ahead = self.ahead_rows if ahead is None else ahead
        refusal = late_refusal(self.name, ahead, n, self.row_seconds, timeout_s)
        if refusal is not None:
            self.stats.rejected_items += 1
            raise refusal

    def _admit_to_queue(self, n: int) -> None:
        """The queue's hard bound on memory, whatever was reserved."""
        if self._queued_rows and self._queued_rows + n > self.max_queue_rows:
            self.stats.rejected_items += 1
            raise Overloaded(
                f"model {self.name} is overloaded: {self._queued_rows} series queued, "
                f"{n} more would pass the limit of {self.max_queue_rows}; retry later",
                limit=self.max_queue_rows,
                retry_after_s=self.retry_after_s,
            )

    def reserve(self, n: int, timeout_s: float, since: float | None = None) -> int:
        """Admit `n` rows of a request whose body is still to be read (an estimate), and count them as
        ahead of later requests until it submits (`submit(..., reservation=)`), is released, or its
        deadline passes. Without this, bodies being read and parsed were in no count, and a flood of big
        requests was refused only once they had been parsed, seconds later. Raises Overloaded.

        `since`: when the request arrived (perf_counter, one clock for every process of a host). Given, it
        is judged behind the work admitted before it only: queued, running, and the reservations of
        requests that arrived earlier. A body reserved as it arrives keeps its place in line, so a flood
        of uploads serves the first ones and refuses the later, rather than refusing each on its way
        (every one of 120 was, judged behind all the others' bytes)."""
        if self._closed or not self.running:
            raise ModelNotReady(f"model {self.name} is not serving", retry_after_s=self.retry_after_s)
        # On time only: `n` is an estimate, and the queue's bound is on the rows really sent (`submit`).
        self._admit_in_time(n, timeout_s, None if since is None else self._ahead_of(since))
        key = next(self._reservation_ids)
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

    def _ahead_of(self, since: float) -> int:
        """Rows admitted before a request that arrived at `since`."""
        self._expire_reservations()
        earlier = sum(
            rows for rows, _, arrived in self._reserved.values() if arrived is None or arrived <= since
        )
        return self._queued_rows + self._running_rows + earlier

    def quiet_for(self, seconds: float) -> bool:
        """Nothing admitted, queued or running, and nothing arrived or finished for `seconds` (what an
        unload waits for before it stops the batcher)."""
        return self.ahead_rows == 0 and not self._calls and perf_counter() - self._last_activity >= seconds

    def _expire_reservations(self) -> None:
        if self._reserved:
            now = perf_counter()
            for key in [k for k, (_, expiry, _) in self._reserved.items() if expiry <= now]:
                self.release(key)

    async def submit(self, inputs: Feed, timeout_s: float, reservation: int | None = None) -> np.ndarray:
        """Queue `inputs` (named [n, ...] arrays, n >= 1); wait for their outputs ([n, ...], same order).
        A request admitted by `reserve` is admitted for its reserved rows; only rows beyond them are
        judged again."""
        n = feed_rows(inputs)
        if n < 1:
            raise ValueError("submit needs at least one row")
        if self._closed or not self.running:
            raise ModelNotReady(f"model {self.name} is not serving", retry_after_s=self.retry_after_s)
        self._last_activity = perf_counter()
        reserved = self.release(reservation) if reservation is not None else 0
        if n > reserved:  # rows the reservation did not count are judged on time
            self._admit_in_time(n - reserved, timeout_s)
        self._admit_to_queue(n)
        now = perf_counter()
        item = WorkItem(inputs, asyncio.get_running_loop().create_future(), now + timeout_s, now)
        inline = n <= self.inline_max_rows and self._idle() and self.inline_when()
        if inline:  # and not if the loop has other work: a request not yet read counts for nothing yet
            inline = not await _loop_has_other_work() and self._idle() and self.inline_when()
        if self._closed:  # stopped while the loop passes ran
            raise ModelNotReady(f"model {self.name} is not serving", retry_after_s=self.retry_after_s)
        if inline:
            item.t_dispatched, item.next_row, item.session_calls = now, n, 1
            await self._execute(Batch([Segment(item, 0, n)], n, now), inline=True)  # never suspends
            if self.release_fn is not None:
                self._wakeup.set()  # the worker then counts the idle time before releasing memory
            return item.future.result()
        self._queue.append(item)
        self._queued_rows += n
        self._wakeup.set()
        try:
            return await asyncio.wait_for(item.future, timeout_s)
        except TimeoutError:
            raise Timeout(
                f"model {self.name}: no result within the request timeout of {timeout_s:g}s",
                limit=timeout_s,
            ) from None

    def _idle(self) -> bool:
        return not self._queue and not self._calls and not self._releasing

    # -- worker ----------------------------------------------------------------------------------
    async def _work(self) -> None:
        while True:
            if not self._queue:
                if self._calls:  # a finishing call or a new request wakes us
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                if self._closed:
                    return
                self._wakeup.clear()
                if self.release_fn is not None and self._ran_since_release:
                    try:
                        async with asyncio.timeout(self.release_after_s):
                            await self._wakeup.wait()
                    except TimeoutError:
                        await self._release()
                    continue
                await self._wakeup.wait()
                continue
            try:
                await self._free_call()
                if not self._queue:
                    continue
                await self._gather()
                batch = self._take_batch()
                if batch is not None:
                    await self._launch(batch)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not kill the worker: log it and keep serving
                logger.exception("batcher %s: unexpected error in the worker loop", self.name)

    async def _launch(self, batch: Batch) -> None:
        """Start `batch`'s session call as a task of its own; a big call once no other runs."""
        if batch.rows > self.concurrent_max_rows:
            try:
                while self._calls:
                    await asyncio.wait(self._calls)
            except asyncio.CancelledError:  # stopped meanwhile: its requests are answered, not lost
                self._fail_batch(batch, ModelNotReady(f"model {self.name} is shutting down"))
                raise
            self._exclusive = True
        call = asyncio.get_running_loop().create_task(self._execute(batch))
        self._calls.add(call)
        call.add_done_callback(self._call_done)

    async def _free_call(self) -> None:
        """Wait until another session call may start: fewer than max_calls under way, none of them big."""
        while self._calls and (self._exclusive or len(self._calls) >= self.max_calls):
            await asyncio.wait(self._calls, return_when=asyncio.FIRST_COMPLETED)

    def _call_done(self, call: asyncio.Task[None]) -> None:
        self._calls.discard(call)
        if not call.cancelled() and call.exception() is not None:  # _execute fails its own batch first
            logger.error("batcher %s: a session call failed", self.name, exc_info=call.exception())
        if not self._calls:
            self._exclusive = False
        self._wakeup.set()

    async def _gather(self) -> None:
        """Wait for a full batch or for the oldest queued request's max wait, whichever is first."""
        flush_at = self._queue[0].t_enqueued + self.max_wait_s
        while self._queued_rows < self.max_batch_rows and not self._closed:
            remaining = flush_at - perf_counter()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._wakeup.wait()
            except TimeoutError:
                return

    def _take_batch(self) -> Batch | None:
        now = perf_counter()
        segments: list[Segment] = []
        rows = 0
        limit = self.max_batch_rows
        if self.max_calls > 1 and self._queued_rows <= self.concurrent_max_rows * self.max_calls:
            # Small work is shared out over the calls that may run: on one thread a bigger call is no
            # cheaper per row, and its rows wait for all of it.
            free = self.max_calls - len(self._calls)
            limit = min(limit, SHARED_CALL_ROWS, max(1, math.ceil(self._queued_rows / free)))
        while self._queue and rows < limit:
            item = self._queue[0]
            if item.future.done() or item.deadline <= now:
                self._queue.popleft()
                self._queued_rows -= item.n_rows - item.next_row
                if item.future.done():
                    self.stats.dropped_items += 1
                else:
                    self.stats.expired_items += 1
                    item.future.set_exception(Timeout(f"model {self.name}: request expired in the queue"))
                continue
            take = min(item.n_rows - item.next_row, limit - rows)
            segments.append(Segment(item, item.next_row, item.next_row + take))
            if item.t_dispatched is None:
                item.t_dispatched = now
            item.next_row += take
            item.session_calls += 1
            rows += take
            self._queued_rows -= take
            if item.next_row == item.n_rows:
                self._queue.popleft()
        return Batch(segments, rows, now) if segments else None

    async def _execute(self, batch: Batch, inline: bool = False) -> None:
        """One session call, in the executor, or `inline` on this thread (then it never suspends)."""
        batch.t_run_start = perf_counter()
        self._running_rows += batch.rows
        try:
            inputs = _concatenate(batch.segments)
            if inline:
                outputs = (self.inline_fn or self.run_fn)(inputs)
            else:
                loop = asyncio.get_running_loop()
                outputs = await loop.run_in_executor(self._executor, self.run_fn, inputs)
            if not isinstance(outputs, np.ndarray) or outputs.shape[:1] != (batch.rows,):
                got = getattr(outputs, "shape", type(outputs).__name__)
                raise RuntimeError(f"session returned {got} for a batch of {batch.rows} rows")
        except asyncio.CancelledError:
            batch.error = ModelNotReady(f"model {self.name} is shutting down")
            self._fail_batch(batch, batch.error)
            raise
        except ServiceError as exc:  # the runner's own verdict (a device fault: 503, retryable)
            batch.error = exc
            self.stats.failed_calls += 1
            logger.error("batcher %s: session call on %d rows failed: %s", self.name, batch.rows, exc)
            self._fail_batch(
                batch, type(exc)(f"model {self.name}: {exc.message}", retry_after_s=exc.retry_after_s)
            )
            return
        except Exception as exc:
            batch.error = exc
            self.stats.failed_calls += 1
            logger.exception("batcher %s: session call on %d rows failed", self.name, batch.rows)
            self._fail_batch(batch, InferenceError(f"model {self.name}: inference failed: {exc}"))
            return
        finally:
            batch.t_run_end = self._last_activity = perf_counter()
            self._running_rows -= batch.rows
            self._ran_since_release = True
            self._measure_drain(batch)
            self.stats.session_calls += 1
            self.stats.rows += batch.rows
            self.stats.batch_rows[batch.rows] += 1
            if self.on_batch is not None:
                self.on_batch(batch)
        self._distribute(batch, outputs)

    async def _release(self) -> None:
        """`release_fn` off the loop; a request that comes meanwhile waits for it (about a millisecond)."""
        assert self.release_fn is not None
        self._ran_since_release = False
        self.stats.releases += 1
        self._releasing = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self.release_fn)
        except Exception:  # memory stays as it was: serving goes on
            logger.exception("batcher %s: releasing memory failed", self.name)
        finally:
            self._releasing = False

    def _measure_drain(self, batch: Batch) -> None:
        """Seconds per row: from the end of the previous call when calls ran back to back or side by side
        (the time between the ends is what the rows cost the queue), else the session call alone;
        smoothed (EWMA)."""
        assert batch.t_run_start is not None and batch.t_run_end is not None
        start = batch.t_run_start if self._busy_since is None else self._busy_since
        seconds = (batch.t_run_end - start) / batch.rows
        self.row_seconds = seconds if self.row_seconds is None else 0.7 * self.row_seconds + 0.3 * seconds
        self._busy_since = batch.t_run_end if self._queue or self._running_rows else None

    def _distribute(self, batch: Batch, outputs: np.ndarray) -> None:
        offset = 0
        for seg in batch.segments:
            n = seg.stop - seg.start
            item = seg.item
            if not item.future.done():
                if seg.start == 0 and n == item.n_rows:
                    item.output = outputs[offset : offset + n]
                else:
                    if item.output is None:
                        item.output = np.empty((item.n_rows, *outputs.shape[1:]), outputs.dtype)
                    item.output[seg.start : seg.stop] = outputs[offset : offset + n]
                item.rows_pending -= n
                if item.rows_pending == 0:
                    item.t_completed = batch.t_run_end
                    item.future.set_result(item.output)
                    if self.on_item is not None:
                        self.on_item(item)
            offset += n

    def _fail_batch(self, batch: Batch, error: Exception) -> None:
        for seg in batch.segments:
            self._fail(seg.item, error)

    def _fail(self, item: WorkItem, error: Exception) -> None:
        if not item.future.done():
            item.future.set_exception(error)


def late_refusal(
    name: str, ahead: int, n: int, row_seconds: float | None, timeout_s: float
) -> Overloaded | None:
    """The refusal of `n` more rows that could not be through the session within `timeout_s` behind
    `ahead` rows at `row_seconds` each; None when they can. An idle version takes any request, so a request
    is never refused for its size alone. (The batcher's rule; a front end applies it to the backlog the
    engine last reported, app/engine/client.py.)"""
    if not ahead or row_seconds is None or (ahead + n) * row_seconds <= ADMIT_FRACTION * timeout_s:
        return None
    drain_s = ahead * row_seconds
    return Overloaded(
        f"model {name} is overloaded: {ahead} series ahead need about {drain_s:.2f}s, too much of the "
        f"{timeout_s:.2f}s this request has left (at most {ADMIT_FRACTION:.0%} of it is queued for); "
        "retry later",
        retry_after_s=max(1, math.ceil(drain_s)),
    )


def feed_rows(inputs: Feed) -> int:
    """The rows in a feed; every input must have that many (one per series)."""
    lengths = {name: int(array.shape[0]) for name, array in inputs.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"a feed needs one or more inputs with equal row counts, got {lengths}")
    return next(iter(lengths.values()))


def _concatenate(segments: list[Segment]) -> dict[str, np.ndarray]:
    """One feed from the batch's segments, each input concatenated in segment order."""
    if len(segments) == 1:
        seg = segments[0]
        return seg.item.slice(seg.start, seg.stop)
    parts = [seg.item.slice(seg.start, seg.stop) for seg in segments]
    names = parts[0].keys()
    if any(part.keys() != names for part in parts):  # one version's requests all carry the same inputs
        raise ValueError(f"requests in one batch carry different inputs: {[sorted(p) for p in parts]}")
    return {name: np.concatenate([part[name] for part in parts], axis=0) for name in parts[0]}


async def _loop_has_other_work() -> bool:
    """Whether the event loop has anything else to do now: a callback ready to run, or a socket ready
    to read or accept on (a request not yet read is in no count of requests in flight).

    asyncio's selector loops poll level-triggered, so asking the selector with a zero timeout takes
    nothing from the loop (one syscall, a few microseconds). Any other loop: False, after the passes
    that let such work show itself in the counts.
    """
    loop = asyncio.get_running_loop()
    selector = getattr(loop, "_selector", None)
    ready = getattr(loop, "_ready", None)
    if isinstance(selector, selectors.BaseSelector) and isinstance(ready, deque):
        return bool(ready) or bool(selector.select(0))
    for _ in range(INLINE_LOOK_PASSES):
        await asyncio.sleep(0)
    return False
