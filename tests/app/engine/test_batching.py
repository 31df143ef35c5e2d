"""DynamicBatcher on its own: merging, splitting, order, overload, deadlines, failures, shutdown, and
feeds of several inputs (window and phase) that must stay together row by row."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

from app.core.errors import InferenceError, ModelNotReady, Overloaded, Timeout
from app.engine.batching import SHARED_CALL_ROWS, BatcherConfig, DynamicBatcher, Feed
from app.engine.types import VersionObserver
from tests.utils.batching import FnRunner, Recorder
from tests.utils.speed import scaled


def double(rows: np.ndarray) -> np.ndarray:
    return rows * 2.0


def make(run_fn: Callable[[np.ndarray], np.ndarray] = double, **kwargs: Any) -> DynamicBatcher:
    """A batcher over one-input feeds {"x": rows}; `run_fn` sees the rows."""
    return make_feed(lambda feed: run_fn(feed["x"]), **kwargs)


def make_feed(
    run_fn: Callable[[Feed], np.ndarray],
    *,
    release_fn: Callable[[], object] | None = None,
    inline_when: Callable[[], bool] = lambda: True,
    observer: VersionObserver | None = None,
    **config: Any,
) -> DynamicBatcher:
    """`config`: BatcherConfig's fields over small defaults; memory is released (after `release_after_s`,
    1 s by default) only with a `release_fn`."""
    options: dict[str, Any] = {
        "name": "t",
        "max_batch_rows": 64,
        "max_wait_s": 0.01,
        "max_queue_rows": 10_000,
        "release_after_s": None if release_fn is None else 1.0,
    }
    options.update(config)
    runner = FnRunner(run_fn, release_fn)
    return DynamicBatcher(runner, BatcherConfig(**options), observer, alone=inline_when)


async def submit(batcher: DynamicBatcher, x: np.ndarray, timeout_s: float) -> np.ndarray:
    return await batcher.submit({"x": x}, timeout_s)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 20))


def rows(start: int, n: int) -> np.ndarray:
    return np.arange(start, start + n, dtype=np.float32).reshape(n, 1)


def test_concurrent_submits_are_merged_and_each_gets_its_own_rows() -> None:
    async def scenario() -> None:
        recorder = Recorder()
        batches = recorder.batches
        batcher = make(max_wait_s=0.05, observer=recorder)
        batcher.start()
        inputs = [rows(100 * i, 1 + i % 4) for i in range(20)]
        outputs = await asyncio.gather(*(submit(batcher, x, 5.0) for x in inputs))
        for x, y in zip(inputs, outputs, strict=True):
            np.testing.assert_array_equal(y, x * 2)
        assert batcher.stats.session_calls == len(batches) < 20
        assert batcher.stats.rows == sum(len(x) for x in inputs)
        assert all(b.run_s >= 0 and b.outcome == "ok" for b in batches)
        await batcher.stop()

    run(scenario)


def test_full_batch_is_flushed_without_waiting() -> None:
    async def scenario() -> None:
        batcher = make(max_batch_rows=4, max_wait_s=10.0)
        batcher.start()
        started = time.perf_counter()
        out = await submit(batcher, rows(0, 4), 5.0)
        assert time.perf_counter() - started < 2.0
        np.testing.assert_array_equal(out, rows(0, 4) * 2)
        await batcher.stop()

    run(scenario)


def test_large_request_is_split_and_reassembled_in_order() -> None:
    async def scenario() -> None:
        seen: list[int] = []

        def record(x: np.ndarray) -> np.ndarray:
            seen.append(len(x))
            return x * 2

        batcher = make(record, max_batch_rows=7)
        batcher.start()
        x = rows(0, 30)
        small = rows(1000, 2)
        big_out, small_out = await asyncio.gather(submit(batcher, x, 5.0), submit(batcher, small, 5.0))
        np.testing.assert_array_equal(big_out, x * 2)
        np.testing.assert_array_equal(small_out, small * 2)
        assert max(seen) <= 7 and sum(seen) == 32
        await batcher.stop()

    run(scenario)


def test_the_observer_sees_each_call_and_each_queue_wait() -> None:
    async def scenario() -> None:
        recorder = Recorder()
        batcher = make(observer=recorder)
        batcher.start()
        await submit(batcher, rows(0, 3), 5.0)
        (wait,) = recorder.waits
        assert wait >= 0
        assert batcher.stats.session_calls == 1
        await batcher.stop()

    run(scenario)


def test_overloaded_when_queue_is_full_but_an_empty_queue_takes_anything() -> None:
    async def scenario() -> None:
        gate = threading.Event()
        calls: list[int] = []

        def blocked(x: np.ndarray) -> np.ndarray:
            calls.append(len(x))
            gate.wait(5)
            return x

        batcher = make(blocked, max_batch_rows=1, max_wait_s=0.0, max_queue_rows=2, retry_after_s=7)
        batcher.start()
        first = asyncio.ensure_future(submit(batcher, rows(0, 1), 5.0))
        while not calls:
            await asyncio.sleep(0.001)
        second = asyncio.ensure_future(submit(batcher, rows(1, 2), 5.0))
        await asyncio.sleep(0)
        assert batcher.queued_rows == 2
        with pytest.raises(Overloaded) as info:
            await submit(batcher, rows(3, 1), 5.0)
        assert info.value.retry_after_s == 7 and info.value.limit == 2
        assert batcher.stats.rejected_items == 1
        gate.set()
        np.testing.assert_array_equal(await first, rows(0, 1))
        np.testing.assert_array_equal(await second, rows(1, 2))
        # With the queue empty, a request larger than the whole queue is still taken.
        np.testing.assert_array_equal(await submit(batcher, rows(0, 5), 5.0), rows(0, 5))
        await batcher.stop()

    run(scenario)


def test_deadline_expired_in_the_queue_never_reaches_the_session() -> None:
    async def scenario() -> None:
        gate = threading.Event()
        calls: list[np.ndarray] = []

        def blocked(x: np.ndarray) -> np.ndarray:
            calls.append(x)
            gate.wait(5)
            return x

        batcher = make(blocked, max_batch_rows=1, max_wait_s=0.0)
        batcher.start()
        first = asyncio.ensure_future(submit(batcher, rows(0, 1), 5.0))
        while not calls:
            await asyncio.sleep(0.001)
        with pytest.raises(Timeout):
            await submit(batcher, rows(9, 1), 0.05)
        gate.set()
        await first
        np.testing.assert_array_equal(await submit(batcher, rows(5, 1), 5.0), rows(5, 1))
        assert [float(c[0, 0]) for c in calls] == [0.0, 5.0]
        assert batcher.stats.dropped_items == 1
        await batcher.stop()

    run(scenario)


def test_failing_session_fails_only_its_batch_and_worker_survives() -> None:
    async def scenario() -> None:
        def maybe_fail(x: np.ndarray) -> np.ndarray:
            if (x < 0).any():
                raise RuntimeError("boom")
            return x

        batcher = make(maybe_fail, max_wait_s=0.0)
        batcher.start()
        with pytest.raises(InferenceError, match="boom"):
            await submit(batcher, -rows(1, 2), 5.0)
        np.testing.assert_array_equal(await submit(batcher, rows(1, 2), 5.0), rows(1, 2))
        assert batcher.stats.failed_calls == 1 and batcher.running
        await batcher.stop()

    run(scenario)


def test_wrong_output_shape_is_an_inference_error() -> None:
    async def scenario() -> None:
        batcher = make(lambda x: x[:1], max_wait_s=0.0)
        batcher.start()
        with pytest.raises(InferenceError, match="returned"):
            await submit(batcher, rows(0, 3), 5.0)
        await batcher.stop()

    run(scenario)


def test_stop_drains_queued_work_then_refuses_new_work() -> None:
    async def scenario() -> None:
        batcher = make(max_wait_s=0.2)
        batcher.start()
        pending = [asyncio.ensure_future(submit(batcher, rows(i, 1), 5.0)) for i in range(3)]
        await asyncio.sleep(0)  # let them queue
        await batcher.stop()
        for i, task in enumerate(pending):
            np.testing.assert_array_equal(await task, rows(i, 1) * 2)
        assert not batcher.running
        with pytest.raises(ModelNotReady):
            await submit(batcher, rows(0, 1), 5.0)

    run(scenario)


def test_stop_cancels_what_cannot_drain() -> None:
    async def scenario() -> None:
        gate = threading.Event()
        batcher = make(lambda x: (gate.wait(5), x)[1], max_batch_rows=1, max_wait_s=0.0)
        batcher.start()
        first = asyncio.ensure_future(submit(batcher, rows(0, 1), 5.0))
        second = asyncio.ensure_future(submit(batcher, rows(1, 1), 5.0))
        await asyncio.sleep(0.05)
        await batcher.stop(drain_timeout_s=0.1)
        for task in (first, second):
            with pytest.raises(ModelNotReady):
                await task
        gate.set()

    run(scenario)


@pytest.mark.parametrize("max_calls", [1, 2])
def test_stop_drains_calls_side_by_side_or_fails_them_when_it_cannot(max_calls: int) -> None:
    """Calls under way and queued rows finish within the drain; past it, every request still gets an
    answer (ModelNotReady), whether its call was running, waiting to run alone, or queued."""

    async def scenario() -> None:
        batcher = make(
            lambda x: (time.sleep(0.05), x * 2)[1], max_wait_s=0.0, max_calls=max_calls, concurrent_max_rows=2
        )
        batcher.start()
        inputs = [rows(0, 1), rows(1, 1), rows(2, 5), rows(7, 1)]  # the 5-row call must run alone
        tasks = [asyncio.ensure_future(submit(batcher, x, 5.0)) for x in inputs]
        await asyncio.sleep(0.01)
        await batcher.stop(drain_timeout_s=5.0)
        for x, task in zip(inputs, tasks, strict=True):
            np.testing.assert_array_equal(await task, x * 2)

        gate = threading.Event()
        batcher = make(
            lambda x: (gate.wait(5), x)[1], max_wait_s=0.0, max_calls=max_calls, concurrent_max_rows=2
        )
        batcher.start()
        tasks = [asyncio.ensure_future(submit(batcher, x, 5.0)) for x in inputs]
        await asyncio.sleep(0.05)
        await batcher.stop(drain_timeout_s=0.1)
        for task in tasks:
            with pytest.raises(ModelNotReady):
                await task
        gate.set()

    run(scenario)


@pytest.mark.parametrize(
    "bad", [{"max_batch_rows": 0}, {"max_calls": 0}, {"concurrent_max_rows": -1}, {"inline_max_rows": -1}]
)
def test_rejects_bad_configuration(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        make(**bad)


def window_plus_phase(feed: Feed) -> np.ndarray:
    """A fake cycle model: each row's output is its window value plus 1000·its phase."""
    return feed["window"] + 1000.0 * feed["phase"][:, None]


def test_window_and_phase_rows_stay_together_when_merged_and_split() -> None:
    async def scenario() -> None:
        recorder = Recorder()
        batches = recorder.batches
        batcher = make_feed(window_plus_phase, max_batch_rows=5, max_wait_s=0.05, observer=recorder)
        batcher.start()
        rng = np.random.default_rng(0)
        feeds = [
            {"window": rows(100 * i, n), "phase": rng.integers(0, 24, n).astype(np.int64)}
            for i, n in enumerate([1, 3, 7, 2, 12, 1])
        ]
        outputs = await asyncio.gather(*(batcher.submit(f, 5.0) for f in feeds))
        for feed, out in zip(feeds, outputs, strict=True):
            np.testing.assert_array_equal(out, window_plus_phase(feed))
        assert len(batches) < sum(len(f["phase"]) for f in feeds)  # merged
        assert max(b.rows for b in batches) == 5  # and the 7- and 12-row requests were split
        await batcher.stop()

    run(scenario)


def test_a_feed_needs_one_row_per_series_in_every_input() -> None:
    async def scenario() -> None:
        batcher = make_feed(window_plus_phase)
        batcher.start()
        with pytest.raises(ValueError, match="equal row counts"):
            await batcher.submit({"window": rows(0, 3), "phase": np.zeros(2, np.int64)}, 5.0)
        with pytest.raises(ValueError, match="equal row counts"):
            await batcher.submit({}, 5.0)
        assert batcher.stats.session_calls == 0
        await batcher.stop()

    run(scenario)


def test_requests_with_different_inputs_fail_their_batch_not_the_worker() -> None:
    async def scenario() -> None:
        batcher = make_feed(window_plus_phase, max_wait_s=0.05)
        batcher.start()
        with_phase = {"window": rows(0, 1), "phase": np.ones(1, np.int64)}
        results = await asyncio.gather(
            batcher.submit(with_phase, 5.0),
            batcher.submit({"window": rows(1, 1)}, 5.0),
            return_exceptions=True,
        )
        assert all(isinstance(r, InferenceError) for r in results)
        np.testing.assert_array_equal(await batcher.submit(with_phase, 5.0), [[1000.0]])
        await batcher.stop()

    run(scenario)


def slow_double(seconds_per_call: float) -> Callable[[np.ndarray], np.ndarray]:
    def run_fn(x: np.ndarray) -> np.ndarray:
        time.sleep(seconds_per_call)
        return x * 2.0

    return run_fn


def test_admission_refuses_at_once_what_cannot_finish_in_time() -> None:
    async def scenario() -> None:
        batcher = make(slow_double(0.05), max_batch_rows=1, max_wait_s=0)
        batcher.start()
        await submit(batcher, rows(0, 1), 5.0)  # one batch measures the drain: about 0.05 s a row
        assert batcher.row_seconds is not None and 0.04 < batcher.row_seconds < 0.5
        # 0.3 s of budget: the first requests fit (0.05 s a row ahead of them), later ones cannot
        pending = [asyncio.ensure_future(submit(batcher, rows(i, 1), 0.3)) for i in range(12)]
        results = await asyncio.gather(*pending, return_exceptions=True)
        served = [r for r in results if isinstance(r, np.ndarray)]
        refused = [r for r in results if isinstance(r, Overloaded)]
        assert len(served) + len(refused) == 12, results  # no 504: refused up front or served in time
        assert 2 <= len(served) <= 8 and refused
        assert all(e.retry_after_s is not None and e.retry_after_s >= 1 for e in refused)
        assert batcher.stats.rejected_items == len(refused)
        await batcher.stop()

    run(scenario)


def test_refusal_is_immediate_and_an_idle_batcher_takes_any_request() -> None:
    async def scenario() -> None:
        batcher = make(slow_double(0.2), max_batch_rows=64, max_wait_s=0)
        batcher.start()
        await submit(batcher, rows(0, 1), 5.0)  # measured: about 0.2 s a row
        # idle again: a request estimated beyond its deadline is still taken (never refused for its size)
        big = await submit(batcher, rows(0, 8), 1.0)
        assert big.shape == (8, 1)
        busy = asyncio.ensure_future(submit(batcher, rows(0, 4), 5.0))
        await asyncio.sleep(0.05)  # its session call is under way
        t0 = time.perf_counter()
        with pytest.raises(Overloaded) as info:
            await submit(batcher, rows(0, 4), 0.1)
        # at once, not after the deadline (0.1 s): 50 ms on a quiet machine, more on a busy one
        assert time.perf_counter() - t0 < min(scaled(0.05), 0.1)
        assert "this request has left" in info.value.message
        await busy
        await batcher.stop()

    run(scenario)


def test_memory_is_released_once_the_version_has_been_idle_not_between_busy_batches() -> None:
    """`release_fn` runs off the loop after `release_after_s` with nothing queued, once per busy spell:
    never while requests keep coming (the session keeps its arena then), never twice for nothing."""

    async def scenario() -> None:
        events: list[str] = []
        loop_thread = threading.get_ident()

        def run_fn(x: np.ndarray) -> np.ndarray:
            events.append("run")
            return x * 2.0

        def release() -> None:
            assert threading.get_ident() != loop_thread  # the session's thread, not the event loop
            events.append("release")

        batcher = make(run_fn, max_wait_s=0.0, release_fn=release, release_after_s=0.2)
        batcher.start()
        await asyncio.sleep(0.3)
        assert events == []  # nothing ran yet: nothing to release
        for i in range(5):  # back to back, closer together than release_after_s
            await submit(batcher, rows(i, 2), 5.0)
            await asyncio.sleep(0.02)
        assert events == ["run"] * 5
        await asyncio.sleep(0.4)
        assert events == ["run"] * 5 + ["release"]
        await asyncio.sleep(0.4)
        assert events.count("release") == 1  # idle and already released: no second call
        np.testing.assert_array_equal(await submit(batcher, rows(0, 1), 5.0), rows(0, 1) * 2)
        await asyncio.sleep(0.4)
        assert events[-2:] == ["run", "release"] and events.count("release") == 2
        await batcher.stop()

    run(scenario)


def test_a_failing_release_leaves_the_batcher_serving() -> None:
    async def scenario() -> None:
        releases: list[None] = []

        def release() -> None:
            releases.append(None)
            raise RuntimeError("no memory to give back")

        batcher = make(max_wait_s=0.0, release_fn=release, release_after_s=0.0)
        batcher.start()
        await submit(batcher, rows(0, 1), 5.0)
        await asyncio.sleep(0.1)
        assert len(releases) == 1
        np.testing.assert_array_equal(await submit(batcher, rows(3, 2), 5.0), rows(3, 2) * 2)
        await batcher.stop()

    run(scenario)


def test_inline_only_when_the_predicate_allows_and_the_batcher_is_idle() -> None:
    """A one-row request runs on the caller's thread when idle and allowed; otherwise it is queued and
    runs in the executor."""

    async def scenario() -> None:
        threads: list[int] = []
        allowed = [True]

        def run_fn(x: np.ndarray) -> np.ndarray:
            threads.append(threading.get_ident())
            return x * 2.0

        batcher = make(run_fn, max_wait_s=0.0, inline_max_rows=1, inline_when=lambda: allowed[0])
        batcher.start()
        loop_thread = threading.get_ident()
        await quiet_loop()
        np.testing.assert_array_equal(await submit(batcher, rows(0, 1), 5.0), rows(0, 1) * 2)
        assert threads[-1] == loop_thread  # inline
        await quiet_loop()
        await submit(batcher, rows(0, 2), 5.0)
        assert threads[-1] != loop_thread  # over inline_max_rows: the executor
        allowed[0] = False
        await quiet_loop()
        await submit(batcher, rows(0, 1), 5.0)
        assert threads[-1] != loop_thread  # not allowed (another request in flight): the executor
        assert batcher.stats.session_calls == 3
        await batcher.stop()

    run(scenario)


async def quiet_loop() -> None:
    """Return once nothing else is ready to run on the loop (the worker parked, callbacks run)."""
    await asyncio.sleep(0.01)


def test_no_inline_call_when_a_request_arrives_while_the_batcher_looks() -> None:
    """Before a small request runs inline, the batcher lets the event loop run a few passes: a request that
    arrived on another connection (its socket ready to read, not yet read, so in no count) is read and
    counted in flight meanwhile, and the small request is queued instead of holding the loop."""

    async def scenario() -> None:
        threads: list[int] = []
        in_flight = [0]

        def run_fn(x: np.ndarray) -> np.ndarray:
            threads.append(threading.get_ident())
            return x * 2.0

        batcher = make(run_fn, max_wait_s=0.0, inline_max_rows=1, inline_when=lambda: in_flight[0] == 0)
        batcher.start()
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        handled = asyncio.Event()

        async def handle() -> None:  # the server's task for the request: its first step counts it
            in_flight[0] += 1
            await handled.wait()
            in_flight[0] -= 1

        tasks: list[asyncio.Task[None]] = []
        a, b = socket.socketpair()
        with a, b:

            def on_readable() -> None:  # the server reads the request and starts its task
                a.recv(16)
                tasks.append(loop.create_task(handle()))

            loop.add_reader(a.fileno(), on_readable)
            try:
                await quiet_loop()
                b.send(b"GET")  # arrives now: nothing counts it yet
                await submit(batcher, rows(0, 1), 5.0)
                assert threads[-1] != loop_thread  # counted during the look: the executor
            finally:
                loop.remove_reader(a.fileno())
            handled.set()
            await asyncio.gather(*tasks)
        await quiet_loop()
        await submit(batcher, rows(0, 1), 5.0)
        assert threads[-1] == loop_thread  # nothing else: inline
        await batcher.stop()

    run(scenario)


def test_small_calls_run_side_by_side_up_to_max_calls_and_a_big_one_alone() -> None:
    """With max_calls=2, queued small rows go out in calls of at most SHARED_CALL_ROWS rows, two at once
    (a request of several rows is split over them); more queued rows than the small calls may hold
    make one big call, which runs with no other; every request still gets its own rows."""

    async def scenario() -> None:
        lock = threading.Lock()
        running = [0]
        overlaps: list[tuple[int, int]] = []  # (rows of the call, calls running when it started)

        def run_fn(x: np.ndarray) -> np.ndarray:
            with lock:
                running[0] += 1
                overlaps.append((len(x), running[0]))
            time.sleep(0.05)
            with lock:
                running[0] -= 1
            return x * 2.0

        batcher = make(run_fn, max_wait_s=0.0, max_calls=2, concurrent_max_rows=16)
        batcher.start()
        small = [rows(10 * i, 1 + i % 3) for i in range(8)] + [rows(500, 9)]
        outputs = await asyncio.gather(*(submit(batcher, x, 5.0) for x in small))
        for x, y in zip(small, outputs, strict=True):
            np.testing.assert_array_equal(y, x * 2)
        assert max(n for _, n in overlaps) == 2  # two small calls at once
        assert max(rows_ for rows_, _ in overlaps) == SHARED_CALL_ROWS

        overlaps.clear()
        big, tail = rows(100, 40), [rows(200 + i, 1) for i in range(3)]  # 43 rows > 2 calls x 16
        outputs = await asyncio.gather(submit(batcher, big, 5.0), *(submit(batcher, x, 5.0) for x in tail))
        for x, y in zip([big, *tail], outputs, strict=True):
            np.testing.assert_array_equal(y, x * 2)
        assert any(rows_ > 16 for rows_, _ in overlaps)
        assert all(n == 1 for rows_, n in overlaps if rows_ > 16)  # the big call ran alone
        await batcher.stop()

    run(scenario)


def test_no_inline_call_while_memory_is_being_released() -> None:
    """A request that comes while release_fn runs is queued behind it, not run beside it on the loop."""

    async def scenario() -> None:
        order: list[str] = []
        releasing = threading.Event()
        finish_release = threading.Event()

        def release() -> None:
            order.append("release start")
            releasing.set()
            finish_release.wait(5)
            order.append("release end")

        def run_fn(x: np.ndarray) -> np.ndarray:
            order.append("run")
            return x * 2.0

        batcher = make(run_fn, max_wait_s=0.0, release_fn=release, release_after_s=0.0, inline_max_rows=1)
        batcher.start()
        await submit(batcher, rows(0, 1), 5.0)  # inline; then the idle release starts
        await asyncio.get_running_loop().run_in_executor(None, releasing.wait, 5)
        pending = asyncio.ensure_future(submit(batcher, rows(1, 1), 5.0))
        await asyncio.sleep(0.05)
        assert order == ["run", "release start"]  # not run inline beside the release
        finish_release.set()
        np.testing.assert_array_equal(await pending, rows(1, 1) * 2)
        assert order[:4] == ["run", "release start", "release end", "run"]
        await batcher.stop()

    run(scenario)


def test_reserved_rows_count_as_admitted_until_submitted_released_or_expired() -> None:
    async def scenario() -> None:
        batcher = make(row_seconds=0.01)  # seeded: 10 ms per row
        batcher.start()
        assert batcher.backlog_s == 0
        first = batcher.reserve(50, timeout_s=1.0)  # idle: any size is admitted
        assert batcher.ahead_rows == 50 and batcher.backlog_s == pytest.approx(0.5)
        with pytest.raises(Overloaded):  # (50 + 20) x 10 ms > 60% of 1 s
            batcher.reserve(20, timeout_s=1.0)
        # the request submits: its reservation becomes its rows, admitted without another judgement
        out = await batcher.submit({"x": rows(0, 50)}, 1.0, reservation=first)
        assert len(out) == 50 and batcher.ahead_rows == 0
        second = batcher.reserve(30, timeout_s=1.0)
        assert batcher.release(second) == 30 and batcher.release(second) == 0 and batcher.ahead_rows == 0
        batcher.reserve(40, timeout_s=0.05)  # a request that never comes back: its deadline ends it
        assert batcher.ahead_rows == 40
        await asyncio.sleep(0.1)
        assert batcher.ahead_rows == 0
        batcher.row_seconds = 0.01  # as seeded (the 50-row call above measured this machine's speed)
        bigger = batcher.reserve(2, timeout_s=1.0)  # more rows than estimated: the extra ones are judged
        batcher.reserve(55, timeout_s=1.0)
        with pytest.raises(Overloaded):
            await batcher.submit({"x": rows(0, 10)}, 1.0, reservation=bigger)
        await batcher.stop()
        assert batcher.ahead_rows == 0

    run(scenario)


def test_a_reservation_that_grows_keeps_its_place_in_line() -> None:
    """Bodies reserved as they arrive (`since`: when each request arrived): an older request's growth is
    judged behind the older work only, a newer one behind everything; so of two uploads under way, the
    first keeps growing and the second is refused, rather than both."""

    async def scenario() -> None:
        batcher = make(row_seconds=0.01)  # 10 ms per row; 60% of 1 s is 60 rows
        batcher.start()
        old = batcher.reserve(20, timeout_s=1.0, since=1.0)
        new = batcher.reserve(20, timeout_s=1.0, since=2.0)
        batcher.release(old)  # the older body doubled: 40 rows, behind nothing older
        old = batcher.reserve(40, timeout_s=1.0, since=1.0)
        batcher.release(new)
        with pytest.raises(Overloaded):  # the newer one doubled: behind the older one's 40, 40 is too many
            batcher.reserve(40, timeout_s=1.0, since=2.0)
        assert batcher.ahead_rows == 40
        with pytest.raises(Overloaded):  # without an arrival time, every reservation is ahead
            batcher.reserve(30, timeout_s=1.0)
        batcher.release(old)
        await batcher.stop()

    run(scenario)
