"""The members' decomposition at a long period (app/artifacts/local_models.py `seasonal_factors`, a
LocalSpec's `long_period`): hours with a weekday and a weekend shape forecast as that week where the window
holds three weeks, the day's decomposition kept where it holds fewer or shows no week, the other series
read over a shorter window of their own (`short_length`), the `panel.local` block's round trip and
refusals, and the search trying it on a daily cycle of hours only, a split preferred where validation
cannot tell it from the day's."""

from __future__ import annotations

import numpy as np
import pytest

from app.artifacts.hybrid import FEATURES, LocalSpec, Tilt
from app.artifacts.local_models import LONG_CYCLES, fit_forecast, seasonal_factors
from export.global_models.hybrid import (
    WINDOW_TOLERANCE,
    _with_splits,
    local_key,
    local_key_parts,
    long_periods,
)

DAY, WEEK, H = 24, 168, 48
SMOOTH = ("ses", "holt", "damped", "theta", "dotm", "ets", "ces")  # the members on the adjusted values


def hours(weeks: int) -> np.ndarray:
    """A weekday shape Monday to Friday and a flatter, lower one at the weekend, 100 on average."""
    day = 100 + 30 * np.sin(2 * np.pi * (np.arange(DAY) - 6) / DAY)
    weekend = 70 + 10 * np.sin(2 * np.pi * (np.arange(DAY) - 6) / DAY)
    return np.tile(np.r_[np.tile(day, 5), np.tile(weekend, 2)], weeks)


def test_a_week_of_hours_is_forecast_as_that_week_where_three_of_them_are_seen() -> None:
    series = hours(5)  # ends on a Sunday night: the next 48 hours are a Monday and a Tuesday
    window = series[-LONG_CYCLES * WEEK :][None]
    week = fit_forecast(window, DAY, H, SMOOTH, long_period=WEEK)
    day = fit_forecast(window, DAY, H, SMOOTH)
    monday = hours(1)[:H]
    for m in SMOOTH:
        np.testing.assert_allclose(week[m][0], monday, rtol=1e-6)
        # by the day alone, Monday comes back between a weekday and the weekend
        assert np.abs(day[m][0] - monday).max() > 5


def test_the_days_decomposition_stays_where_the_window_is_short_or_shows_no_week() -> None:
    rng = np.random.default_rng(0)
    short = hours(5)[-(LONG_CYCLES * WEEK - 1) :]  # an hour short of three weeks
    daily = np.tile(100 + 30 * np.sin(2 * np.pi * np.arange(DAY) / DAY), 3 * 7) + rng.normal(0, 0.1, 3 * WEEK)
    x = np.full((2, LONG_CYCLES * WEEK), np.nan)
    x[0, 1:], x[1] = short, daily
    idx, factor, ahead = seasonal_factors(x, DAY, H, long_period=WEEK)
    _, day_factor, day_ahead = seasonal_factors(x, DAY, H)
    np.testing.assert_array_equal(factor, day_factor)
    np.testing.assert_array_equal(ahead, day_ahead)
    # without a long period the factors are the cycle's indices, as the members read them before
    L = x.shape[1]
    np.testing.assert_array_equal(day_factor, idx[:, (L - 1 - np.arange(L)) % DAY])


def test_the_long_period_round_trips_and_is_refused_where_it_cannot_apply() -> None:
    spec = LocalSpec(("theta", "damped"), (1 / 3, 1 / 3), 504, DAY, H, 48, long_period=WEEK)
    block = spec.to_json()
    assert (block["schema"], block["long_period"]) == (3, WEEK) and LocalSpec.from_json(block) == spec
    assert "long_period" not in LocalSpec(("theta",), (0.5,), 192, DAY, H, 48).to_json()
    tilt = Tilt((0.0,) * len(FEATURES), (1.0,) * len(FEATURES), ((0.1,) * len(FEATURES),) * 3)
    tilted = LocalSpec(("theta", "damped"), (1 / 3, 1 / 3), 504, DAY, H, 48, tilt, long_period=WEEK)
    assert tilted.to_json()["schema"] == 3 and LocalSpec.from_json(tilted.to_json()) == tilted
    with pytest.raises(ValueError, match="incomplete"):  # schema 3 says a long period: one must be there
        LocalSpec.from_json({k: v for k, v in block.items() if k != "long_period"})
    with pytest.raises(ValueError, match="long_period"):
        LocalSpec(("theta",), (0.5,), 504, DAY, H, 48, long_period=100)  # not a multiple of the cycle
    with pytest.raises(ValueError, match="long_period"):
        LocalSpec(("theta",), (0.5,), 336, DAY, H, 48, long_period=WEEK)  # a window of two weeks


def test_the_search_tries_a_week_on_hours_alone_and_names_its_scores() -> None:
    assert long_periods(DAY) == [WEEK]
    assert long_periods(12) == long_periods(4) == long_periods(7) == long_periods(1) == []
    spec = LocalSpec(("dotm", "damped"), (1 / 3, 1 / 3), 672, DAY, H, 48, long_period=WEEK)
    assert local_key(spec) == "local_dotm+damped_672_w168"
    assert local_key(LocalSpec(("dotm",), (0.5,), 192, DAY, H, 48)) == "local_dotm_192"
    assert local_key_parts("local_dotm+damped_672_w168") == (("dotm", "damped"), 672, WEEK, None)
    assert local_key_parts("local_dotm_192") == (("dotm",), 192, None, None)
    split = LocalSpec(("dotm", "damped"), (1 / 3, 1 / 3), 504, DAY, H, 48, long_period=WEEK, short_length=192)
    assert local_key(split) == "local_dotm+damped_504_w168_s192"
    assert local_key_parts(local_key(split)) == (("dotm", "damped"), 504, WEEK, 192)


def test_the_feed_decomposes_by_the_week_as_the_members_do() -> None:
    spec = LocalSpec(("theta", "dotm"), (0.25, 0.25), 504, DAY, H, 48, long_period=WEEK)
    x = hours(3)[None]
    local, weight = spec.feed(x, None)
    fc = fit_forecast(x, DAY, H, ("theta", "dotm"), long_period=WEEK)
    np.testing.assert_allclose(local[0], 0.25 * (fc["theta"][0] + fc["dotm"][0]), rtol=1e-12)
    np.testing.assert_allclose(weight[:, 0], 0.5)


def split_panel() -> np.ndarray:
    """Two series of three weeks: the weekday/weekend hours, and a daily cycle whose level moved a week
    before the end (a short window reads the new level, a long one averages both)."""
    rng = np.random.default_rng(1)
    daily = np.tile(100 + 30 * np.sin(2 * np.pi * np.arange(DAY) / DAY), 3 * 7) + rng.normal(0, 0.5, 3 * WEEK)
    daily[-WEEK:] += 40
    return np.stack([hours(3), daily])


def test_a_short_length_reads_the_series_without_a_week_over_their_last_values_alone() -> None:
    x = split_panel()
    members = ("theta", "dotm", "sar", "hw")
    split = fit_forecast(x, DAY, H, members, long_period=WEEK, short_length=192)
    week = fit_forecast(x[:1], DAY, H, members, long_period=WEEK)
    short = fit_forecast(x[1:, -192:], DAY, H, members)
    for m in members:
        np.testing.assert_array_equal(split[m][0], week[m][0])
        np.testing.assert_array_equal(split[m][1], short[m][0])
    # the whole window by the day (the long candidate's) forecasts the second series otherwise
    whole = fit_forecast(x, DAY, H, members, long_period=WEEK)
    np.testing.assert_array_equal(whole["theta"][0], split["theta"][0])
    assert np.abs(whole["theta"][1] - split["theta"][1]).max() > 1
    # the block feeds the same members
    spec = LocalSpec(members, (0.2,) * 4, 504, DAY, H, 48, long_period=WEEK, short_length=192)
    local, _ = spec.feed(x, None)
    np.testing.assert_allclose(local, 0.2 * sum(split[m] for m in members), rtol=1e-12)
    assert "any other series by its cycle over its last 192 values" in spec.long_note()


def test_a_short_length_round_trips_as_schema_4_and_is_refused_where_it_cannot_apply() -> None:
    spec = LocalSpec(("theta", "damped"), (1 / 3, 1 / 3), 504, DAY, H, 48, long_period=WEEK, short_length=192)
    block = spec.to_json()
    assert (block["schema"], block["short_length"]) == (4, 192) and LocalSpec.from_json(block) == spec
    assert "short_length" not in LocalSpec(("theta",), (0.5,), 504, DAY, H, 48, long_period=WEEK).to_json()
    with pytest.raises(ValueError, match="incomplete"):  # schema 4 says a short length: one must be there
        LocalSpec.from_json({k: v for k, v in block.items() if k != "short_length"})
    with pytest.raises(ValueError, match="short_length"):  # without a long period it has no meaning
        LocalSpec(("theta",), (0.5,), 504, DAY, H, 48, short_length=192)
    with pytest.raises(ValueError, match="short_length"):
        LocalSpec(("theta",), (0.5,), 504, DAY, H, 48, long_period=WEEK, short_length=504)


def test_a_split_replaces_the_days_decomposition_where_validation_cannot_tell_them_apart() -> None:
    day = LocalSpec(("theta",), (0.5,), 192, DAY, H, 48)
    week = LocalSpec(("theta",), (0.5,), 504, DAY, H, 48, long_period=WEEK)
    split = LocalSpec(("theta",), (0.5,), 504, DAY, H, 48, long_period=WEEK, short_length=192)
    near = 1.0 * (1 + WINDOW_TOLERANCE / 2)
    assert _with_splits({None: (1.0, day), WEEK: (1.2, week)}, [(near, split)]) == (near, split)
    far = 1.0 * (1 + 2 * WINDOW_TOLERANCE)
    assert _with_splits({None: (1.0, day), WEEK: (1.2, week)}, [(far, split)]) == (1.0, day)
    # where the week for every series validates best, it stays the choice
    assert _with_splits({None: (1.0, day), WEEK: (0.9, week)}, [(0.95, split)]) == (0.9, week)
    assert _with_splits({None: (1.0, day), WEEK: (1.1, week)}, [(0.95, split)]) == (0.95, split)


def test_a_series_without_a_week_counts_its_values_in_the_short_window_it_is_read_over() -> None:
    spec = LocalSpec(("theta", "dotm"), (0.25, 0.25), 504, DAY, H, 48, long_period=WEEK, short_length=192)
    x = split_panel()[:, -504:].copy()
    x[1, -192:] = np.nan  # 312 values observed, none in the last 192 hours its members would read
    assert spec.observed(x).tolist() == [504, 0]
    assert spec.read_length(x).tolist() == [504, 192]
    assert spec.skipped(x) == [
        None,
        "the global read-out alone: 0 observed values in the last 192 steps, the local models (theta, dotm) "
        "need 48",
    ]
    local, weight = spec.feed(x, None)
    assert weight[:, 0].tolist() == [0.5, 0.0] and not local[1].any()
    # the week's candidate (no short length) reads all 504 hours of both
    whole = LocalSpec(("theta", "dotm"), (0.25, 0.25), 504, DAY, H, 48, long_period=WEEK)
    assert whole.observed(x).tolist() == [504, 312] and whole.skipped(x) == [None, None]
