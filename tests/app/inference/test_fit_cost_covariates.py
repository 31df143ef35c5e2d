"""A covariate model's fit costs what its covariates add (issue 46, item 2): each window's raw row (D)
through the mix (D x G) and the read-out's G' more features in the normal equations count as read-out
work, and a calendar's reads (horizon steps x calendar features of every window whose row is built) as
calendar work at CALENDAR_SECONDS (app/inference/refit.py; constants from `python -m bench.fit_cost`).
Before, the estimate ignored covariates and admitted covariate fits that could not finish in time."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.artifacts.covariates import CovariateLayout, StaticCovariate
from app.inference import refit
from app.inference.refit import backtest_work, estimated_seconds, fit_work
from tests.app.inference.test_fit_admission import SPEC

H, L = SPEC.fit.horizon, SPEC.input_length
# The shops' kinds of covariate (tests/utils/shops.py): a future, a past, a static and a calendar one.
LAYOUT = CovariateLayout(
    input_length=L,
    horizon=H,
    past=("footfall",),
    future=("promo",),
    calendar=("month",),
    static=(StaticCovariate("size", ("big", "small")),),
)


def histories(n: int, length: int) -> list[np.ndarray]:
    return [np.ones(length) for _ in range(n)]


def test_covariates_add_their_features_and_equations_to_the_read_out_work() -> None:
    K = len(SPEC.heads)
    D = LAYOUT.width
    assert D == L * 1 + H * (1 + 12) + 2
    G = 1 * K + (D - L)  # the past covariate through the kernels, the rest as they are
    plain = fit_work(SPEC, histories(4, 200), [], None)
    with_covariates = fit_work(SPEC, histories(4, 200), [], None, LAYOUT)
    windows = sum(refit.training_windows(histories(4, 200), SPEC.fit))
    assert windows <= refit.cache_rows(SPEC.fit)  # features built once, equations every IRLS pass
    F = K + SPEC.fit.n_lags + 1
    passes = 1 + SPEC.fit.irls

    def equations(f: int) -> int:
        return (f + 1) * (f + 1 + H)

    extra = windows * (D * (G + 1) + passes * (equations(F + G) - equations(F)))  # relative: G' = G
    forecast_extra = 4 * (D * (G + 1) + G * H)  # the 4 forecast windows
    assert with_covariates.readout - plain.readout == pytest.approx(extra + forecast_extra)
    assert with_covariates.calendar == (windows + 4) * H * 1  # one calendar feature
    assert plain.calendar == 0 and with_covariates.local == plain.local == 0


def test_an_additive_effect_adds_one_more_feature_and_both_twice_as_many() -> None:
    sizes = {
        effect: fit_work(SPEC, histories(2, 100), [], None, replace(LAYOUT, effect=effect)).readout
        for effect in ("relative", "additive", "both")
    }
    assert sizes["relative"] < sizes["additive"] < sizes["both"]


def test_a_calendar_costs_calendar_seconds_per_read_and_none_without_one() -> None:
    no_calendar = replace(LAYOUT, calendar=())
    work = fit_work(SPEC, histories(3, 300), [80.0], None, LAYOUT)
    assert fit_work(SPEC, histories(3, 300), [80.0], None, no_calendar).calendar == 0
    assert estimated_seconds(work) == pytest.approx(
        refit.READOUT_SECONDS * work.readout
        + refit.STEP_SECONDS * work.steps
        + refit.CALENDAR_SECONDS * work.calendar
    )
    assert refit.CALENDAR_SECONDS > 0  # measured: a calendar read is a Python datetime, not a multiply-add


def test_a_covariate_fit_the_old_estimate_admitted_is_estimated_past_the_budget() -> None:
    """64 series of 2,000 values with levels: without its covariates well within the default 10 s, with
    them past it (the shops' fits of this kind took seconds where the read-out alone took a fraction)."""
    h = histories(64, 2000)
    assert estimated_seconds(fit_work(SPEC, h, [80.0, 95.0], None)) < 10.0
    assert estimated_seconds(fit_work(SPEC, h, [80.0, 95.0], None, LAYOUT)) > 10.0


def test_a_backtests_refits_count_their_covariates_too() -> None:
    fits = [histories(3, 200 - 6 * j) for j in range(3)]
    windows = [np.ones((3, L, 1)) for _ in range(3)]
    plain = backtest_work(SPEC, fits, windows, None)
    work = backtest_work(SPEC, fits, windows, None, LAYOUT)
    assert work.readout > plain.readout and work.calendar > 0 == plain.calendar
