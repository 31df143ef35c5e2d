"""Fits on request (issue 46, item 6): the slots default to the CPUs, a fit's cost is estimated from its
size before it starts and what cannot finish within RSA_MAX_FIT_SECONDS is refused then (no CPU spent),
and fits run in worker processes at a lower priority than the service."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest

from app.core.config import Settings, usable_cpus
from app.inference import refit
from app.inference.fit_pool import FIT_NICENESS, FitPool, niceness
from app.inference.refit import FitTooLong, FitWork, estimated_seconds, fit_in_slot, fit_work

# The shape of the panel tests' read-out (tests/utils/panel.py's stores, as bench/fit_cost.py timed it):
# monthly, L = 24, 41 REM heads, its manifest's fit settings; the cost reads only the shape.
SPEC = refit.ReadoutSpec.from_json(
    {
        "schema": 1,
        "heads": [["regular", 1, 0.5 + i / 100, 0.0] for i in range(41)],
        "input_length": 24,
        "min_history": 12,
        "horizon": 6,
        "period": 12,
        "n_lags": 12,
        "ridge": 1.0,
        "weighting": "window",
        "train_min": 24,
        "row_scale": "mase",
        "mase_floor": 0.2,
        "irls": 3,
        "irls_floor": 0.05,
    }
)


def test_the_fit_slots_default_to_the_cpus_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RSA_MAX_FITS_IN_FLIGHT", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert usable_cpus() == 3
    assert Settings(model_repository=Path(".")).max_fits_in_flight == 3
    monkeypatch.setenv("RSA_MAX_FITS_IN_FLIGHT", "5")
    assert Settings(model_repository=Path(".")).max_fits_in_flight == 5


def test_the_estimate_grows_with_series_values_and_levels() -> None:
    def work(n: int, length: int, levels: list[float]) -> FitWork:
        return fit_work(SPEC, [np.ones(length) for _ in range(n)], levels, None)

    small = work(3, 60, [])
    assert work(6, 60, []).readout == pytest.approx(2 * small.readout)  # twice the series
    assert work(3, 120, []).readout > 2 * small.readout  # longer series: more windows each
    assert work(3, 600, [80.0]).readout > work(3, 600, []).readout  # the calibration's fit and windows
    assert small.local == 0  # no hybrid half


def test_a_fit_too_big_for_the_budget_is_refused_before_it_starts() -> None:
    """The measured constants: a maximal fit (50 series of 20,000 values with intervals) is estimated past
    the default 10 s, a small one far within; the refusal names the field and the limit, runs nothing
    and takes no slot."""
    settings = Settings(model_repository=Path("."), max_fit_seconds=10.0, max_fits_in_flight=2)
    maximal = fit_work(SPEC, [np.ones(20_000) for _ in range(50)], [80.0, 95.0], None)
    assert estimated_seconds(maximal) > settings.max_fit_seconds
    assert estimated_seconds(fit_work(SPEC, [np.ones(60) for _ in range(3)], [], None)) < 0.1
    ran: list[int] = []

    async def scenario() -> None:
        before = refit._in_flight
        with pytest.raises(FitTooLong) as refused:
            await fit_in_slot(settings, ran.append, maximal, "series", 1)
        assert refused.value.code == "fit_too_long"
        assert refused.value.field == "series" and refused.value.limit == 10.0
        assert "RSA_MAX_FIT_SECONDS" in refused.value.message and "before it started" in refused.value.message
        assert refit._in_flight == before

    asyncio.run(scenario())
    assert ran == []


def test_fits_run_in_worker_processes_at_a_lower_priority() -> None:
    pool = FitPool(1)
    try:
        mine = niceness()
        worker = asyncio.run(pool.run(niceness))
        assert worker == min(19, mine + FIT_NICENESS)
        assert asyncio.run(pool.run(os.getpid)) != os.getpid()
        assert niceness() == mine  # the service's own priority untouched
    finally:
        pool.close()


def test_window_steps_are_counted_apart_from_multiply_adds() -> None:
    """A fit's window steps (windows built x L) are their own unit: the small read-out's cost is mostly
    them, a wide-window one's its matrix products (bench/fit_cost.py)."""
    histories = [np.ones(200) for _ in range(2)]
    work = fit_work(SPEC, histories, [], None)
    windows = sum(refit.training_windows(histories, SPEC.fit))
    # the training windows (features kept between passes: built once), then each series' forecast window
    assert work.steps == (windows + len(histories)) * SPEC.input_length
    assert (work + work).steps == 2 * work.steps


def test_the_constants_estimate_the_measured_fits() -> None:
    """The constants in the code are those results/fit_cost.json measured: each fit of 0.5 s or more there
    (the small and the wide-window read-out, the hybrid, the covariate model) is estimated within a factor
    of 1.25 of its seconds from its recorded work."""
    import json

    run = json.loads((Path(__file__).resolve().parents[3] / "results" / "fit_cost.json").read_text())
    assert {r["model"] for r in run["fits"] if r["seconds"] >= 0.5} == {
        "readout",
        "long",
        "hybrid",
        "covariates",
    }
    for r in run["fits"]:
        work = FitWork(r["readout_work"], r["local_work"], r.get("calendar_work", 0.0), r["step_work"])
        if r["seconds"] >= 0.5:
            assert 0.8 <= r["seconds"] / estimated_seconds(work) <= 1.25, r
