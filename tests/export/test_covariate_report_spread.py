"""Issue 45, item 6, on few series: the covariate report's origins on a panel of fewer than
REPORT_SPREAD_BELOW series are spread over the latter half of the series in steps of weeks or cycles
(`report_spacing`: weeks and a day for sub-daily and daily data, cycles and a step for slower data, never
less than H), where four origins H//2
apart covered the last 2½ days of one half-hourly series; the report records where its origins lie. A
panel of many series keeps the origins export/global_models/hybrid.py's validation holds out."""

from __future__ import annotations

import numpy as np
import pytest

from export.covariates import (
    REPORT_SPREAD_BELOW,
    REPORT_SPREAD_ORIGINS,
    CovariatePlan,
    CovariateSeries,
    report_cuts,
    report_spacing,
)
from export.global_models import search
from export.global_models.config import PanelConfig
from export.global_models.hybrid import origins


def stamps(n: int, step: str) -> np.ndarray:
    unit = {"30m": np.timedelta64(30, "m"), "1h": np.timedelta64(1, "h"), "1D": np.timedelta64(1, "D")}
    return np.datetime64("2014-01-01T00:00", "ns") + np.arange(n) * unit[step]


@pytest.mark.parametrize(
    ("step", "horizon", "period", "spacing"),
    [
        ("30m", 48, 48, 8 * 48),  # a week and a day of half-hours
        ("30m", 7 * 48 + 60, 48, 2 * 7 * 48 + 48),  # H past a week: two weeks and a day
        ("1h", 24, 24, 8 * 24),
        ("1D", 7, 7, 8),
        ("1D", 14, 7, 15),  # two weeks and a day: windows of 14 days do not overlap
    ],
)
def test_the_spacing_is_a_week_and_a_day_for_daily_and_faster_data(
    step: str, horizon: int, period: int, spacing: int
) -> None:
    assert report_spacing(stamps(100, step), horizon, period) == spacing


def test_a_long_series_spreads_its_origins_over_its_latter_half() -> None:
    """Ten months of half-hours (elecdemand's training, 14,592 steps): 15 days apart (two weeks and a
    day), the earliest origin still in the series' second half; a week and a day where that is all."""
    n = 304 * 48
    spacing = report_spacing(stamps(n, "30m"), 48, 48)
    assert spacing == 15 * 48
    s = CovariateSeries("s", np.zeros(n), stamps(n, "30m"))
    cuts = report_cuts([s], 48, 48, 48, 96, 4)
    assert cuts == [j * spacing for j in range(REPORT_SPREAD_ORIGINS)] and cuts[-1] + 48 <= n // 2
    assert report_spacing(stamps(40 * 48, "30m"), 48, 48) == 8 * 48


def test_slower_data_is_spaced_by_a_cycle_and_a_step() -> None:
    months = np.array([f"20{y:02d}-{m:02d}-01" for y in range(10) for m in range(1, 13)], "datetime64[ns]")
    assert report_spacing(months, 18, 12) == 25  # two years and a month: not all origins in one month
    assert report_spacing(months, 6, 12) == 13
    years = np.array([f"{y}-01-01" for y in range(1990, 2020)], "datetime64[ns]")
    assert report_spacing(years, 6, 1) == 6  # no cycle: consecutive, non-overlapping windows


def half_hourly(days: int = 40, seed: int = 0) -> CovariateSeries:
    """Demand with a daily shape plus 0.3 × heating degrees, the daily temperature drawn at random."""
    rng = np.random.default_rng(seed)
    n = days * 48
    t = np.arange(n)
    temp = np.repeat(14 + 4 * rng.standard_normal(days), 48) + 3 * np.sin(2 * np.pi * (t % 48) / 48)
    heating = np.maximum(18 - temp, 0)
    y = 5 + np.sin(2 * np.pi * (t % 48) / 48) + 0.3 * heating + 0.1 * rng.standard_normal(n)
    return CovariateSeries("s", y, stamps(n, "30m"), future={"heating": heating})


@pytest.mark.slow  # ten read-out fits: 11.8 s at load 11.6 (tests/tiers.py's rule: 1 s or more is slow)
def test_one_series_report_spans_weeks_and_says_where() -> None:
    """One half-hourly series of 40 days, H 48: its report's origins lie 8 days apart over a month (five
    of them: the fifth leaves the read-out its training window), where they covered 2½ days."""
    s = half_hourly()
    cfg = PanelConfig(horizon=48, period=48, input_periods=2)
    plan = CovariatePlan.fit([s], (), ("heating",), (), (), effect="relative")
    [row] = search.covariate_report([s], cfg, 96, plan)
    starts = np.array([t.rstrip("Z") for t in row["origin_starts"]], "datetime64[s]")
    assert row["origins"] == len(starts) == 5 and row["origin_spacing"] == 8 * 48
    assert (starts[0] - starts[-1]) / np.timedelta64(1, "D") == 32  # more than a few days
    assert starts[0] == np.datetime64("2014-02-09T00:00")  # the first: the series' last H held out
    assert 0 <= row["wins"] <= row["origins"] and row["verdict"] in ("helps", "unclear", "does not help")


def test_many_series_keep_the_validation_origins() -> None:
    """REPORT_SPREAD_BELOW series or more: origins H//2 apart, each the one export/global_models/hybrid.py
    `origins` holds out (its values before the cut, then H)."""
    H = 6
    series = [half_hourly(3, seed=i) for i in range(REPORT_SPREAD_BELOW)]
    cfg = PanelConfig(horizon=H, period=48)
    cuts = report_cuts(series, H, 48, cfg.history, cfg.train_min, 4)
    assert cuts == [0, 3, 6, 9]
    held = origins(series, H, cfg.history, cfg.train_min, lambda v, k: v.head(len(v) - k), 4)
    assert [len(series[0]) - len(o.fit_part[0]) - H for o in held] == cuts
    few = report_cuts([half_hourly()], H, 48, cfg.history, cfg.train_min, 4)  # one series of 40 days
    assert few == [j * 8 * 48 for j in range(5)] and len(few) <= REPORT_SPREAD_ORIGINS
