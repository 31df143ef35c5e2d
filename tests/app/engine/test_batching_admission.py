"""DynamicBatcher's admission, memory release, inline calls, calls side by side and reservations (merging,
splitting, order, deadlines, failures and shutdown: test_batching.py)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from app.core.errors import Overloaded
from app.engine.batching import SHARED_CALL_ROWS, DrainRate, late_refusal
from app.engine.host import call_cost
from tests.utils.batching import make, rows, run, submit
from tests.utils.speed import scaled


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
        assert batcher.row_seconds is not None and 0.04 < batcher.row_seconds < scaled(0.5)
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


def test_the_drain_rate_is_per_row_of_a_full_call_where_a_call_has_a_fixed_cost() -> None:
    """On a GPU a call costs about the same at 1 row and at 256 (H200, bench.runners, 2026-12-04: 0.88 and
    2.4 ms). The shape timed at load scales each observed call to a full one: after a run of one-row calls
    a backlog of 1,202 rows drains in about five full calls, not 1,202 of them (the rule before, which
    refused 256-series requests on the GPU); on the CPU (no fixed cost) it stays seconds per row."""
    call_s, row_s = call_cost(0.88e-3, 2.4e-3, 256)
    assert call_s == pytest.approx(0.874e-3, abs=1e-6) and row_s == pytest.approx(1.52e-3 / 255)
    gpu = DrainRate((call_s + 256 * row_s) / 256, call_s / row_s, 256)
    cpu = DrainRate(None, 0.0, 256)
    for i in range(40):  # one-row calls of 1 ms each, the queue idle in between
        gpu.observe(i, i + 1e-3, 1, False)
        cpu.observe(i, i + 1e-3, 1, False)
    assert gpu.row_seconds is not None and cpu.row_seconds == pytest.approx(1e-3)
    assert 1202 * gpu.row_seconds == pytest.approx(
        1202 * (1e-3 * (256 + call_s / row_s)) / (256 * (1 + call_s / row_s))
    )
    assert 1202 * gpu.row_seconds < 0.02 < 1202 * cpu.row_seconds / 50
    assert late_refusal("m", 1202, 256, gpu.row_seconds, 1.0) is None
    assert late_refusal("m", 1202, 256, cpu.row_seconds, 1.0) is not None
    full = DrainRate(None, call_s / row_s, 256)  # a full call observed is its own per-row cost
    full.observe(0.0, 2.4e-3, 256, False)
    assert full.row_seconds == pytest.approx(2.4e-3 / 256)


def test_call_cost_floors_the_per_row_cost_where_timing_noise_makes_the_calls_equal() -> None:
    call_s, row_s = call_cost(1e-3, 0.9e-3, 256)  # the big call timed faster than the small one
    assert row_s == pytest.approx(1e-3 * 0.9e-3 / 256) and call_s == pytest.approx(1e-3 - row_s)
    assert call_cost(1e-3, 8e-3, 8) == pytest.approx((0.0, 1e-3))  # linear: no fixed cost
