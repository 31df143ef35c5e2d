"""Evaluation work (backtests, anomaly checks) in a version's batcher (issue 46, item 5): its own queue and
admission, so that it cannot starve forecasts. The logic only (counts, refusals, call order), no clock
bounds: the latency it buys is measured by bench/fairness.py."""

from __future__ import annotations

import asyncio
import os
import threading

import numpy as np
import pytest

from app.core.errors import Overloaded
from app.engine.batching import BatcherConfig, DynamicBatcher
from app.engine.batching.evaluation import EVALUATION_EVERY, EVALUATION_NICENESS
from tests.app.engine.conftest import (
    Gated,
    evaluation_batcher,
    evaluation_rows,
    forecast_rows,
    run_scenario,
    until,
)
from tests.utils.batching import FnRunner


def test_forecasts_go_before_waiting_evaluation_and_evaluation_runs_in_chunks() -> None:
    """A 40-row backtest queued behind a running call, then three forecasts: the forecasts' call goes
    first, the backtest in calls of at most evaluation_call_rows, and every answer is its own rows."""

    async def scenario() -> None:
        gate = Gated()
        batcher = evaluation_batcher(gate)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(forecast_rows(1, 100), 5.0))
        await until(lambda: len(gate.calls) == 1)  # the session is busy
        backtest = asyncio.ensure_future(batcher.submit(evaluation_rows(40), 5.0, evaluation=True))
        await until(lambda: batcher.evaluation_rows == 40)
        forecasts = [asyncio.ensure_future(batcher.submit(forecast_rows(1, 10 + i), 5.0)) for i in range(3)]
        await until(lambda: batcher.queued_rows == 43)
        gate.open.set()
        answers = await asyncio.gather(first, backtest, *forecasts)
        np.testing.assert_array_equal(answers[1], evaluation_rows(40)["x"] * 2)
        for i, answer in enumerate(answers[2:]):
            np.testing.assert_array_equal(answer, forecast_rows(1, 10 + i)["x"] * 2)
        kinds = [kind for kind, _ in gate.calls]
        assert kinds[:2] == ["forecast", "forecast"], gate.calls  # the forecasts before any evaluation
        assert "forecast+evaluation" not in kinds  # never mixed in one call
        chunks = [rows for kind, rows in gate.calls if kind == "evaluation"]
        assert sum(chunks) == 40 and max(chunks) == 8 and len(chunks) == 5
        await batcher.stop()

    run_scenario(scenario)


def test_evaluation_in_flight_is_bounded_per_version_and_forecasts_still_admitted() -> None:
    async def scenario() -> None:
        gate = Gated()
        batcher = evaluation_batcher(gate, max_evaluations=2, retry_after_s=3)
        batcher.start()
        held = [asyncio.ensure_future(batcher.submit(evaluation_rows(4), 5.0, evaluation=True)) for _ in "ab"]
        await until(lambda: batcher.evaluations == 2)
        with pytest.raises(Overloaded) as refused:
            await batcher.submit(evaluation_rows(4), 5.0, evaluation=True)
        assert refused.value.limit == 2 and refused.value.retry_after_s == 3
        assert "RSA_MAX_EVALUATIONS_IN_FLIGHT" in refused.value.message
        forecast = asyncio.ensure_future(batcher.submit(forecast_rows(2), 5.0))
        gate.open.set()
        await asyncio.gather(*held, forecast)
        assert batcher.evaluations == 0  # the slots are given back
        np.testing.assert_array_equal(
            await batcher.submit(evaluation_rows(4), 5.0, evaluation=True), evaluation_rows(4)["x"] * 2
        )
        await batcher.stop()

    run_scenario(scenario)


def test_forecasts_are_judged_against_their_own_backlog_evaluation_against_everything() -> None:
    """At a drain of 10 ms a row, 1,000 evaluation rows waiting (10 s of work) do not make a 1 s forecast
    late; a second evaluation is judged behind them and refused."""

    async def scenario() -> None:
        gate = Gated()
        batcher = evaluation_batcher(gate, row_seconds=0.01, evaluation_call_rows=1, max_batch_rows=1)
        batcher.start()
        running = asyncio.ensure_future(batcher.submit(forecast_rows(1), 30.0))
        await until(lambda: len(gate.calls) == 1)
        backtest = asyncio.ensure_future(batcher.submit(evaluation_rows(1000), 30.0, evaluation=True))
        await until(lambda: batcher.evaluation_rows == 1000)
        assert batcher.ahead_rows == 1  # the running row only: the evaluation rows wait behind forecasts
        forecast = asyncio.ensure_future(batcher.submit(forecast_rows(2, 50), 1.0))  # admitted
        with pytest.raises(Overloaded):  # 10 s of evaluation ahead of it, 1 s to go
            await batcher.submit(evaluation_rows(2), 1.0, evaluation=True)
        gate.open.set()
        np.testing.assert_array_equal(await forecast, forecast_rows(2, 50)["x"] * 2)
        await asyncio.gather(running, backtest)
        await batcher.stop()

    run_scenario(scenario)


def test_evaluation_keeps_a_share_while_forecasts_keep_coming() -> None:
    """Forecasts always waiting: one evaluation chunk goes after every EVALUATION_EVERY forecast calls."""

    async def scenario() -> None:
        gate = Gated()
        batcher = evaluation_batcher(gate, max_batch_rows=1, evaluation_call_rows=1)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(forecast_rows(1, 500), 5.0))
        await until(lambda: len(gate.calls) == 1)
        backtest = asyncio.ensure_future(batcher.submit(evaluation_rows(3), 5.0, evaluation=True))
        forecasts = [asyncio.ensure_future(batcher.submit(forecast_rows(1, 1 + i), 5.0)) for i in range(12)]
        await until(lambda: batcher.queued_rows == 15)
        gate.open.set()
        await asyncio.gather(first, backtest, *forecasts)
        kinds = [kind for kind, _ in gate.calls[1:]]
        every = EVALUATION_EVERY
        assert kinds[: 3 * (every + 1)] == (["forecast"] * every + ["evaluation"]) * 3, kinds
        await batcher.stop()

    run_scenario(scenario)


def test_evaluation_leaves_one_call_to_forecasts_when_calls_run_side_by_side() -> None:
    """max_calls=2: evaluation chunks hold at most one call, so a forecast arriving while they wait and
    run starts in the other at once."""

    async def scenario() -> None:
        gate = Gated()
        batcher = evaluation_batcher(gate, max_calls=2, concurrent_max_rows=8, evaluation_call_rows=8)
        batcher.start()
        backtest = asyncio.ensure_future(batcher.submit(evaluation_rows(32), 5.0, evaluation=True))
        await until(lambda: len(gate.calls) == 1)
        for _ in range(20):  # the loop has time to start a second evaluation call: it must not
            await asyncio.sleep(0)
        assert gate.calls == [("evaluation", 8)]
        forecast = asyncio.ensure_future(batcher.submit(forecast_rows(1), 5.0))
        await until(lambda: len(gate.calls) == 2)
        assert gate.calls[1] == ("forecast", 1)  # in the free call while the chunk runs
        gate.open.set()
        await asyncio.gather(backtest, forecast)
        await batcher.stop()

    run_scenario(scenario)


def test_evaluation_chunks_run_on_threads_of_lower_priority() -> None:
    """Linux: the thread an evaluation chunk computes on is niced EVALUATION_NICENESS above the one a
    forecast's call runs on; the service's own threads keep theirs."""
    niceness: dict[str, int] = {}

    def run(feed: dict[str, np.ndarray]) -> np.ndarray:
        kind = "evaluation" if feed["x"][0, 0] < 0 else "forecast"
        niceness[kind] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return feed["x"] * 2.0

    async def scenario() -> None:
        batcher = DynamicBatcher(
            FnRunner(run), BatcherConfig(name="t", max_batch_rows=8, max_wait_s=0.0, max_queue_rows=100)
        )
        batcher.start()
        await batcher.submit(evaluation_rows(3), 5.0, evaluation=True)
        await batcher.submit(forecast_rows(1), 5.0)
        await batcher.stop()

    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    asyncio.run(asyncio.wait_for(scenario(), 20))
    assert niceness["evaluation"] == min(19, niceness["forecast"] + EVALUATION_NICENESS)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine
