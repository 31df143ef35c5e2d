"""Evaluation work is admitted on what it costs on this host (issue 46): the batcher's evaluation drain
rate (seconds per row through the evaluation queue, seeded or measured over its chunks) refuses up front
what could not be through within ADMIT_FRACTION of the request's time left, where a maximal backtest on a
loaded host used to be admitted and answered 504 at the deadline. Driven by injected rates and a fake
clock: no wall-clock bound."""

from __future__ import annotations

import asyncio
import math
import threading

import numpy as np
import pytest

from app.core.errors import InvalidInput, Overloaded
from app.engine.batching import batcher as batcher_module
from app.engine.batching.admission import ADMIT_FRACTION
from app.engine.batching.evaluation import EVALUATION_ROWS
from tests.app.engine.conftest import (
    Gated,
    evaluation_batcher,
    evaluation_rows,
    forecast_rows,
    run_scenario,
    until,
)


def doubled(feed: dict[str, np.ndarray]) -> np.ndarray:
    return feed["x"] * 2.0


def test_evaluation_that_cannot_be_through_in_time_alone_is_refused_before_it_queues() -> None:
    """At 10 ms a row and 10 s left, 6 s (ADMIT_FRACTION) hold 600 rows: 1,024 are refused at once,
    naming the rows that would fit, with nothing run; 600 are admitted and answered."""
    calls: list[int] = []

    def counted(feed: dict[str, np.ndarray]) -> np.ndarray:
        calls.append(len(feed["x"]))
        return doubled(feed)

    async def scenario() -> None:
        batcher = evaluation_batcher(counted, evaluation_row_seconds=0.01)
        batcher.start()
        with pytest.raises(InvalidInput) as refused:
            await batcher.submit(evaluation_rows(1024), 10.0, evaluation=True)
        fits = math.floor(ADMIT_FRACTION * 10.0 / 0.01 + 1e-9)
        assert refused.value.field == EVALUATION_ROWS and refused.value.limit == fits == 600
        assert "1024 windows" in refused.value.message and "600 windows would fit" in refused.value.message
        assert calls == [] and batcher.evaluation_rows == 0 and batcher.evaluations == 0
        assert batcher.stats.rejected_items == 1
        answer = await batcher.submit(evaluation_rows(fits), 10.0, evaluation=True)
        np.testing.assert_array_equal(answer, evaluation_rows(fits)["x"] * 2)
        await batcher.stop()

    run_scenario(scenario)


def test_evaluation_that_fits_alone_but_not_behind_the_evaluation_ahead_is_overloaded() -> None:
    """A 500-row backtest admitted (5 s of 6), then 200 more rows would end past the budget behind it:
    Overloaded with Retry-After the ahead rows' drain time (5 s); forecasts are not judged on this rate."""

    async def scenario() -> None:
        gate = Gated()
        batcher = evaluation_batcher(gate, evaluation_row_seconds=0.01)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(evaluation_rows(500), 10.0, evaluation=True))
        await until(lambda: len(gate.calls) == 1)  # its first chunk runs, the rest waits
        with pytest.raises(Overloaded) as refused:
            await batcher.submit(evaluation_rows(200), 10.0, evaluation=True)
        assert refused.value.retry_after_s == 5 and "500 windows" in refused.value.message
        forecast = asyncio.ensure_future(batcher.submit(forecast_rows(3), 10.0))
        small = asyncio.ensure_future(batcher.submit(evaluation_rows(100), 10.0, evaluation=True))
        await until(lambda: batcher.evaluations == 2)  # 600 rows: exactly the budget, admitted
        gate.open.set()
        await asyncio.gather(first, forecast, small)
        await batcher.stop()

    run_scenario(scenario)


def test_without_an_evaluation_rate_the_forecasts_rate_judges_and_unknown_admits() -> None:
    async def scenario() -> None:
        unknown = evaluation_batcher(doubled)
        unknown.start()
        assert unknown.evaluation_row_seconds is None
        await unknown.submit(evaluation_rows(1024), 10.0, evaluation=True)  # nothing measured: admitted
        await unknown.stop()
        forecasts_rate = evaluation_batcher(doubled, row_seconds=0.01)
        forecasts_rate.start()
        with pytest.raises(InvalidInput) as refused:
            await forecasts_rate.submit(evaluation_rows(700), 10.0, evaluation=True)
        assert refused.value.limit == 600
        await forecasts_rate.stop()

    run_scenario(scenario)


class FakeClock:
    """The batcher's perf_counter, advanced by the runner: `seconds_per_row` a row of every call."""

    def __init__(self, evaluation_seconds_per_row: float, forecast_seconds_per_row: float) -> None:
        self.now = 1000.0
        self.evaluation = evaluation_seconds_per_row
        self.forecast = forecast_seconds_per_row

    def __call__(self) -> float:
        return self.now

    def run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        x = feed["x"]
        self.now += len(x) * (self.evaluation if x[0, 0] < 0 else self.forecast)
        return x * 2.0


def test_the_evaluation_rate_is_measured_on_its_own_chunks_and_then_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Evaluation chunks at 50 ms a row (niced, shared, a loaded host), forecasts at 1 ms: after a 40-row
    backtest the evaluation rate is 50 ms a row, the forecasts' stays about 1 ms, and 200 rows (10 s) in
    10 s left are refused (120 would fit), where the forecasts' rate alone would have admitted them."""
    clock = FakeClock(0.05, 0.001)
    monkeypatch.setattr(batcher_module, "perf_counter", clock)

    async def scenario() -> None:
        batcher = evaluation_batcher(clock.run, row_seconds=0.001)
        batcher.start()
        await batcher.submit(evaluation_rows(40), 10.0, evaluation=True)
        assert batcher.evaluation_row_seconds == pytest.approx(0.05)
        await batcher.submit(forecast_rows(4), 10.0)
        assert batcher.row_seconds is not None and batcher.row_seconds < 0.05
        with pytest.raises(InvalidInput) as refused:
            await batcher.submit(evaluation_rows(200), 10.0, evaluation=True)
        assert refused.value.limit == 120
        await batcher.stop()

    run_scenario(scenario)


class Recording(FakeClock):
    """FakeClock's runner that records, per call, its kind and whether it ran on the niced evaluation
    threads; evaluation rows take `slow` times the seeded rate (the host got busier than measured)."""

    def __init__(self, slow: float) -> None:
        super().__init__(1.0 * slow, 0.001)
        self.calls: list[tuple[str, bool]] = []
        self.gate = threading.Event()
        self.gate.set()

    def run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        assert self.gate.wait(10)
        x = feed["x"]
        niced = threading.current_thread().name.startswith("rsa-evaluation")
        self.calls.append(("evaluation" if x[0, 0] < 0 else "forecast", niced))
        return super().run(feed)


def test_an_evaluation_behind_its_deadlines_pace_runs_at_the_services_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeded at 1 s a row, 8 rows in 20 s are admitted (8 s of 12); its rows then take 4 s each: after
    the first 4-row chunk (16 s) the 4 rows left need 4 x 1.9 s (the rate now measured) of the 4 s left,
    past URGENT_SHARE of it, so the second chunk runs on the service's threads, not the niced ones."""
    clock = Recording(slow=4.0)
    monkeypatch.setattr(batcher_module, "perf_counter", clock)

    async def scenario() -> None:
        batcher = evaluation_batcher(clock.run, evaluation_row_seconds=1.0, evaluation_call_rows=4)
        batcher.start()
        await batcher.submit(evaluation_rows(8), 20.0, evaluation=True)
        assert clock.calls == [("evaluation", True), ("evaluation", False)]
        await batcher.stop()

    run_scenario(scenario)


def test_an_urgent_evaluation_takes_every_other_call_while_forecasts_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A forecast call runs (gated) after one forecast call while evaluation waited; an 8-row evaluation
    (4.8 s of 6 admitted in 10 s at 0.6 s a row) and a forecast wait. On pace, the forecast would go first
    (evaluation waits EVALUATION_EVERY forecast calls); once the clock has moved 5 s on, the evaluation
    needs 4.8 s of the 5 s left, past URGENT_SHARE of it, and its chunk goes next, at the service's
    priority; forecasts still wait at most that one chunk."""
    clock = Recording(slow=1.0)
    monkeypatch.setattr(batcher_module, "perf_counter", clock)

    async def scenario() -> None:
        batcher = evaluation_batcher(clock.run, evaluation_row_seconds=0.6, evaluation_call_rows=8)
        clock.gate.clear()
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(forecast_rows(1, 100), 10.0))
        await until(lambda: batcher._running_rows == 1)
        backtest = asyncio.ensure_future(batcher.submit(evaluation_rows(8), 10.0, evaluation=True))
        await until(lambda: batcher.evaluation_rows == 8)
        forecast = asyncio.ensure_future(batcher.submit(forecast_rows(1, 7), 30.0))  # outlives the chunk
        await until(lambda: batcher.queued_rows == 9)
        batcher._forecast_streak = 1  # one forecast call while the evaluation waited
        assert not batcher._evaluation_turn()  # on pace: the waiting forecast first
        clock.now += 5.0
        assert batcher._evaluation_turn()
        clock.gate.set()
        await asyncio.gather(first, backtest, forecast)
        assert clock.calls == [("forecast", False), ("evaluation", False), ("forecast", False)]
        await batcher.stop()

    run_scenario(scenario)
