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

Evaluation work (a backtest's or an anomaly check's windows, `submit(..., evaluation=True)`) has its own
queue and its own admission, so that it cannot starve the version's forecasts: evaluation.py says how,
and holds its constants and its refusal rule.

The parts, each in a module of its own: admission (app/engine/batching/admission.py: the time rule, the
queue's bound, reservations, the drain rate), the inline gate (inline.py: when a small request runs on
the event loop itself), the memory release after idle time (release.py), and the queued items and
counters (items.py). The batcher reports each session call and each request's queue wait to its observer
(app/engine/types.py's VersionObserver: the metrics).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from time import perf_counter
from typing import Literal

import numpy as np

from app.core.errors import InferenceError, ModelNotReady, ServiceError, Timeout
from app.engine.batching.admission import Admission, DrainRate
from app.engine.batching.config import BatcherConfig, BatchRunner
from app.engine.batching.evaluation import (
    EVALUATION_EVERY,
    URGENT_SHARE,
    evaluation_executor,
    evaluation_refusal,
)
from app.engine.batching.evaluation import EVALUATION_ROWS as EVALUATION_ROWS  # its importers' name
from app.engine.batching.inline import InlineGate
from app.engine.batching.items import Batch, BatcherStats, Segment, WorkItem
from app.engine.batching.release import MemoryRelease
from app.engine.types import BatchEvent, Feed, VersionObserver, feed_rows

logger = logging.getLogger(__name__)

# Rows per call while small work is shared out over calls side by side. Measured with the service at
# concurrency 16 and 64, two rounds each (bench.loadgen): calls of at most 4 rows had p99 22.8-23.5 and
# 90-94 ms where calls splitting the queue evenly had 32-36 and 98-134 ms, at the same throughput;
# 8 rows 26-36 and 91-131 ms; 2 rows 80-100 ms at c=64, within the same spread, for twice the hops.
SHARED_CALL_ROWS = 4


class DynamicBatcher:
    """Queue and flush policy for one model version. `runner`: the blocking session calls (public, so
    tests can wrap it: slow or failing sessions); `observer`: the metrics' per-version events;
    `executor`: where session calls and the memory release run; `alone()`: whether nothing else is in
    flight (the inline gate's question)."""

    def __init__(
        self,
        runner: BatchRunner,
        config: BatcherConfig,
        observer: VersionObserver | None = None,
        *,
        executor: Executor | None = None,
        alone: Callable[[], bool] = lambda: True,
    ) -> None:
        self.runner = runner
        self.config = config
        self.name = config.name
        self.observer = observer
        self.stats = BatcherStats()
        self.drain = DrainRate(config.row_seconds, config.call_rows, config.max_batch_rows)
        # evaluation chunks' own rate, per row of a full chunk
        self.evaluation_drain = DrainRate(
            config.evaluation_row_seconds,
            config.call_rows,
            config.evaluation_rows_per_call,
        )
        self.admission = Admission(
            config.name, config.max_queue_rows, config.retry_after_s, self.drain, self.stats
        )
        self.inline = InlineGate(config.inline_max_rows, alone)
        # The runner's own method, not one of the batcher's: a bound method of `self` here would make the
        # batcher a reference cycle, and an unloaded version's sessions (native memory, ORT threads) would
        # wait for the cyclic collector (about 12 MiB a load/unload cycle piled up in the model-control test).
        self.memory = MemoryRelease(config.name, runner.release_memory, config.release_after_s)
        self._executor = executor
        self._queue: deque[WorkItem] = deque()
        self._queued_rows = 0
        self._eval_queue: deque[WorkItem] = deque()  # evaluation work, its own queue
        self._eval_rows = 0  # rows in _eval_queue
        self._evaluations = 0  # evaluation requests waiting or running
        self._eval_tasks: set[asyncio.Task[None]] = set()  # session calls of evaluation chunks under way
        self._eval_running = 0  # rows in those calls
        self._forecast_streak = 0  # forecast calls in a row while evaluation waited
        self._running_rows = 0  # rows in the session calls under way
        self._calls: set[asyncio.Task[None]] = set()  # the worker's session calls under way
        self._exclusive = False  # a call of more than concurrent_max_rows rows is under way
        self._last_activity = perf_counter()  # a submit, or a call's end
        self._wakeup = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def max_batch_rows(self) -> int:
        return self.config.max_batch_rows

    @property
    def row_seconds(self) -> float | None:
        """The measured drain cost per row (seeded at load); None: not known yet."""
        return self.drain.row_seconds

    @row_seconds.setter
    def row_seconds(self, value: float | None) -> None:
        self.drain.row_seconds = value

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
        for queue in (self._queue, self._eval_queue):
            while queue:
                self._fail(queue.popleft(), ModelNotReady(f"model {self.name} is shutting down"))
        self._queued_rows = self._eval_rows = 0
        self.admission.clear()

    @property
    def running(self) -> bool:
        return self._worker is not None and not self._worker.done()

    @property
    def queued_rows(self) -> int:
        """Rows waiting: forecasts' and evaluation work's."""
        return self._queued_rows + self._eval_rows

    @property
    def evaluation_rows(self) -> int:
        """Evaluation rows waiting in their own queue."""
        return self._eval_rows

    @property
    def evaluations(self) -> int:
        """Evaluation requests waiting or running."""
        return self._evaluations

    @property
    def evaluation_row_seconds(self) -> float | None:
        """Seconds per row through the evaluation queue: measured on its chunks (seeded by the config),
        else the forecasts' drain rate (a lower bound: evaluation gets a share of the calls, niced);
        None: nothing measured yet."""
        measured = self.evaluation_drain.row_seconds
        return measured if measured is not None else self.drain.row_seconds

    @property
    def ahead_rows(self) -> int:
        """Rows admitted ahead of a forecast and not yet answered: forecasts queued, rows running, and rows
        reserved by requests still parsing. Evaluation rows waiting go after forecasts, so they are not
        ahead of one."""
        return self.admission.ahead(self._queued_rows + self._running_rows)

    @property
    def backlog_s(self) -> float:
        """Seconds the session needs for every row admitted and not yet answered (evaluation's too), at the
        measured drain rate (0 when nothing waits): the signal to scale replicas on."""
        ahead = self.ahead_rows + self._eval_rows
        return ahead * self.row_seconds if ahead and self.row_seconds is not None else 0.0

    # -- admission (app/engine/batching/admission.py) ----------------------------------------------
    def admit(self, n: int, timeout_s: float) -> None:
        """Raise Overloaded unless `n` more rows can be through the session within `timeout_s` and the
        queue has room for them."""
        self.admission.in_time(n, timeout_s, self.ahead_rows)
        self.admission.to_queue(n, self._queued_rows)

    def judge(self, n: int, timeout_s: float) -> None:
        """Raise Overloaded unless `n` more rows could be through the session within `timeout_s`; admit
        nothing (a body's declared size, before its bytes arrive and are reserved)."""
        self.admission.in_time(n, timeout_s, self.ahead_rows)

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
            raise ModelNotReady(f"model {self.name} is not serving", retry_after_s=self.config.retry_after_s)
        return self.admission.reserve(n, timeout_s, since, self._queued_rows + self._running_rows)

    def release(self, key: int) -> int:
        """The reservation's rows stop counting (0 when it was already gone); returns them."""
        return self.admission.release(key)

    def quiet_for(self, seconds: float) -> bool:
        """Nothing admitted, queued or running, and nothing arrived or finished for `seconds` (what an
        unload waits for before it stops the batcher)."""
        return (
            self.ahead_rows == 0
            and not self._eval_rows
            and not self._calls
            and perf_counter() - self._last_activity >= seconds
        )

    # -- submitting ------------------------------------------------------------------------------
    async def submit(
        self, inputs: Feed, timeout_s: float, reservation: int | None = None, evaluation: bool = False
    ) -> np.ndarray:
        """Queue `inputs` (named [n, ...] arrays, n >= 1); wait for their outputs ([n, ...], same order).
        A request admitted by `reserve` is admitted for its reserved rows; only rows beyond them are
        judged again. `evaluation`: a backtest's or an anomaly check's windows, in the evaluation queue."""
        n = feed_rows(inputs)
        if n < 1:
            raise ValueError("submit needs at least one row")
        if self._closed or not self.running:
            raise ModelNotReady(f"model {self.name} is not serving", retry_after_s=self.config.retry_after_s)
        self._last_activity = perf_counter()
        if evaluation:
            if reservation is not None:
                self.release(reservation)
            return await self._evaluate(inputs, n, timeout_s)
        reserved = self.release(reservation) if reservation is not None else 0
        if n > reserved:  # rows the reservation did not count are judged on time
            self.admission.in_time(n - reserved, timeout_s, self.ahead_rows)
        self.admission.to_queue(n, self._queued_rows)
        now = perf_counter()
        item = WorkItem(inputs, asyncio.get_running_loop().create_future(), now + timeout_s, now)
        inline = await self.inline.allows(n, self._idle)
        if self._closed:  # stopped while the loop passes ran
            raise ModelNotReady(f"model {self.name} is not serving", retry_after_s=self.config.retry_after_s)
        if inline:
            item.t_dispatched, item.next_row, item.session_calls = now, n, 1
            await self._execute(Batch([Segment(item, 0, n)], n), inline=True)  # never suspends
            if self.memory.after_s is not None:
                self._wakeup.set()  # the worker then counts the idle time before releasing memory
            return item.future.result()
        self._queue.append(item)
        self._queued_rows += n
        self._wakeup.set()
        return await self._result(item, timeout_s)

    async def _evaluate(self, inputs: Feed, n: int, timeout_s: float) -> np.ndarray:
        """Evaluation work: within `max_evaluations` requests at once, in time behind everything admitted
        (forecasts and evaluation alike), in the evaluation queue."""
        config = self.config
        if self._evaluations >= config.max_evaluations:
            self.admission.over_limit(
                f"model {self.name} is busy evaluating: {self._evaluations} backtests or anomaly checks in "
                f"flight, the limit (RSA_MAX_EVALUATIONS_IN_FLIGHT = {config.max_evaluations}); retry later",
                config.max_evaluations,
            )
        self.admission.in_time(n, timeout_s, self.ahead_rows + self._eval_rows)
        self._evaluation_in_time(n, timeout_s)
        now = perf_counter()
        item = WorkItem(
            inputs, asyncio.get_running_loop().create_future(), now + timeout_s, now, evaluation=True
        )
        self._eval_queue.append(item)
        self._eval_rows += n
        self._evaluations += 1
        self._wakeup.set()
        try:
            return await self._result(item, timeout_s)
        finally:
            self._evaluations -= 1

    def _evaluation_in_time(self, n: int, timeout_s: float) -> None:
        """Refuse `n` evaluation rows that cannot be through the evaluation queue in time, alone or behind
        the evaluation rows waiting and running (app/engine/batching/evaluation.py's rule)."""
        ahead = self._eval_rows + self._eval_running
        refusal = evaluation_refusal(self.name, n, timeout_s, self.evaluation_row_seconds, ahead)
        if refusal is not None:
            self.stats.rejected_items += 1
            raise refusal

    async def _result(self, item: WorkItem, timeout_s: float) -> np.ndarray:
        """A queued item's forecast, or Timeout naming the request's limit (forecasts and evaluation)."""
        try:
            return await asyncio.wait_for(item.future, timeout_s)
        except TimeoutError:
            raise Timeout(
                f"model {self.name}: no result within the request timeout of {timeout_s:g}s",
                limit=timeout_s,
            ) from None

    def _idle(self) -> bool:
        return not self._queue and not self._eval_queue and not self._calls and not self.memory.running

    @property
    def _eval_call_limit(self) -> int:
        """Evaluation calls at once: every call but one when several may run, so one is left to forecasts."""
        return max(1, self.config.max_calls - 1)

    def _evaluation_turn(self) -> bool:
        """Whether the next call is an evaluation chunk: one waits, a call may take it, and no forecast
        waits or forecasts have had EVALUATION_EVERY calls in a row (one, when the evaluation is urgent)."""
        return (
            bool(self._eval_queue)
            and len(self._eval_tasks) < self._eval_call_limit
            and (
                not self._queue
                or self._forecast_streak >= EVALUATION_EVERY
                or (self._forecast_streak >= 1 and self._urgent())
            )
        )

    def _urgent(self) -> bool:
        """Whether the evaluation at the head of its queue is behind its deadline's pace: its rows left
        (and those of the evaluation ahead of it, running) need more than URGENT_SHARE of its time left at
        the evaluation rate."""
        rate = self.evaluation_row_seconds
        if not self._eval_queue or rate is None:
            return False
        item = self._eval_queue[0]
        rows = item.n_rows - item.next_row + self._eval_running
        return rows * rate > URGENT_SHARE * (item.deadline - perf_counter())

    # -- worker ----------------------------------------------------------------------------------
    async def _work(self) -> None:
        while True:
            if not self._queue and not self._eval_queue:
                if self._calls:  # a finishing call or a new request wakes us
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                if self._closed:
                    return
                self._wakeup.clear()
                if self.memory.due:
                    try:
                        async with asyncio.timeout(self.memory.after_s):
                            await self._wakeup.wait()
                    except TimeoutError:
                        await self.memory.run(self._executor)
                    continue
                await self._wakeup.wait()
                continue
            try:
                await self._free_call()
                if not self._queue and not self._eval_queue:
                    continue
                if self._queue:
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
        if batch.rows > self.config.concurrent_max_rows:
            try:
                while self._calls:
                    await asyncio.wait(self._calls)
            except asyncio.CancelledError:  # stopped meanwhile: its requests are answered, not lost
                self._fail_batch(batch, ModelNotReady(f"model {self.name} is shutting down"))
                raise
            self._exclusive = True
        call = asyncio.get_running_loop().create_task(self._execute(batch))
        self._calls.add(call)
        if batch.evaluation:
            self._eval_tasks.add(call)
        call.add_done_callback(self._call_done)

    async def _free_call(self) -> None:
        """Wait until another session call may start: fewer than max_calls under way, none of them big;
        and, when only evaluation work waits, fewer evaluation calls than theirs (a new forecast or a
        call's end wakes it)."""
        while True:
            if self._calls and (self._exclusive or len(self._calls) >= self.config.max_calls):
                await asyncio.wait(self._calls, return_when=asyncio.FIRST_COMPLETED)
            elif not self._queue and self._eval_queue and len(self._eval_tasks) >= self._eval_call_limit:
                self._wakeup.clear()
                await self._wakeup.wait()
            else:
                return

    def _call_done(self, call: asyncio.Task[None]) -> None:
        self._calls.discard(call)
        self._eval_tasks.discard(call)
        if not call.cancelled() and call.exception() is not None:  # _execute fails its own batch first
            logger.error("batcher %s: a session call failed", self.name, exc_info=call.exception())
        if not self._calls:
            self._exclusive = False
        self._wakeup.set()

    async def _gather(self) -> None:
        """Wait for a full batch or for the oldest queued request's max wait, whichever is first."""
        flush_at = self._queue[0].t_enqueued + self.config.max_wait_s
        while self._queued_rows < self.config.max_batch_rows and not self._closed:
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
        config = self.config
        if self._evaluation_turn():
            urgent = self._urgent()
            limit = config.evaluation_rows_per_call
            segments, rows, gone = self._take_from(self._eval_queue, limit, now)
            self._eval_rows -= gone
            if segments:
                self._forecast_streak = 0
                return Batch(segments, rows, evaluation=True, urgent=urgent)
        if not self._queue:
            return None
        limit = config.max_batch_rows
        if config.max_calls > 1 and self._queued_rows <= config.concurrent_max_rows * config.max_calls:
            # Small work is shared out over the calls that may run: on one thread a bigger call is no
            # cheaper per row, and its rows wait for all of it.
            free = config.max_calls - len(self._calls)
            limit = min(limit, SHARED_CALL_ROWS, max(1, math.ceil(self._queued_rows / free)))
        segments, rows, gone = self._take_from(self._queue, limit, now)
        self._queued_rows -= gone
        if segments and self._eval_queue:
            self._forecast_streak += 1
        return Batch(segments, rows) if segments else None

    def _take_from(self, queue: deque[WorkItem], limit: int, now: float) -> tuple[list[Segment], int, int]:
        """Up to `limit` rows from the head of `queue`, dropping what expired or was abandoned: (segments,
        rows taken, rows gone from the queue: taken or dropped)."""
        segments: list[Segment] = []
        rows = gone = 0
        while queue and rows < limit:
            item = queue[0]
            if item.future.done() or item.deadline <= now:
                queue.popleft()
                gone += item.n_rows - item.next_row
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
            gone += take
            if item.next_row == item.n_rows:
                queue.popleft()
        return segments, rows, gone

    async def _execute(self, batch: Batch, inline: bool = False) -> None:
        """One session call, in the executor, or `inline` on this thread (then it never suspends)."""
        batch.t_run_start = perf_counter()
        self._running_rows += batch.rows
        if batch.evaluation:
            self._eval_running += batch.rows
        try:
            inputs = batch.feed()
            if inline:
                outputs = self.runner.run(inputs, True)
            else:
                loop = asyncio.get_running_loop()
                niced = batch.evaluation and not batch.urgent  # urgent: at the service's own priority
                executor = evaluation_executor() if niced else self._executor
                outputs = await loop.run_in_executor(executor, self.runner.run, inputs)
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
            if batch.evaluation:
                self._eval_running -= batch.rows
                self.evaluation_drain.observe(  # its own rate: between chunk ends while evaluation waits
                    batch.t_run_start,
                    batch.t_run_end,
                    batch.rows,
                    bool(self._eval_queue or self._eval_running),
                )
            self.memory.ran_since = True
            self.drain.observe(
                batch.t_run_start,
                batch.t_run_end,
                batch.rows,
                bool(self._queue or self._eval_queue or self._running_rows),
            )
            self.stats.session_calls += 1
            self.stats.rows += batch.rows
            self.stats.batch_rows[batch.rows] += 1
            if self.observer is not None:
                self.observer.on_batch(
                    BatchEvent(batch.rows, batch.t_run_end - batch.t_run_start, _outcome(batch))
                )
        self._distribute(batch, outputs)

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
                    item.future.set_result(item.output)
                    if self.observer is not None and item.queue_wait_s is not None:
                        self.observer.on_queue_wait(item.queue_wait_s)
            offset += n

    def _fail_batch(self, batch: Batch, error: Exception) -> None:
        for seg in batch.segments:
            self._fail(seg.item, error)

    def _fail(self, item: WorkItem, error: Exception) -> None:
        if not item.future.done():
            item.future.set_exception(error)


def _outcome(batch: Batch) -> Literal["ok", "failed", "stopped"]:
    if batch.error is None:
        return "ok"
    return "stopped" if isinstance(batch.error, ModelNotReady) else "failed"  # stopped: a shutdown
