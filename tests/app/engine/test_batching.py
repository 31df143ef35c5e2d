"""DynamicBatcher on its own: merging, splitting, order, overload, deadlines, failures, shutdown, and
feeds of several inputs (window and phase) that must stay together row by row."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from app.core.errors import InferenceError, ModelNotReady, Overloaded, Timeout
from app.engine.batching import Feed
from tests.utils.batching import Recorder, make, make_feed, rows, run, submit
from tests.utils.speed import scaled


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
        assert time.perf_counter() - started < min(scaled(2.0), 9.0)  # not the 10 s wait
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
