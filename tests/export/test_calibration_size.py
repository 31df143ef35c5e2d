"""How many calibration windows intervals need: each level's rank, and the spread that sets the floor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from export.calibration_size import MIN_CALIBRATION_WINDOWS, calibration_plan, coverage_spread, min_windows
from export.conformal import DEFAULT_LEVELS, conformal_quantile


def test_each_level_needs_its_conformal_rank() -> None:
    assert [min_windows(level) for level in DEFAULT_LEVELS] == [1, 4, 9, 19, 99]
    for level in DEFAULT_LEVELS:
        n = min_windows(level)
        assert math.ceil((n + 1) * level / 100 - 1e-9) <= n  # the rank exists ...
        assert math.ceil(n * level / 100 - 1e-9) > n - 1  # ... and not with one window fewer


def test_the_plan_refuses_below_the_floor_and_drops_levels_without_a_rank() -> None:
    assert MIN_CALIBRATION_WINDOWS == 30
    levels, note = calibration_plan(2, DEFAULT_LEVELS)
    assert levels == [] and note.startswith("no prediction intervals: the validation split has 2 window(s)")
    assert calibration_plan(29, DEFAULT_LEVELS)[0] == []
    levels, note = calibration_plan(30, DEFAULT_LEVELS)
    assert levels == [50, 80, 90, 95]
    assert (
        note
        == "intervals at levels 50, 80, 90, 95 calibrated on 30 validation windows (not 99: 99% needs 99)"
    )
    assert calibration_plan(99, DEFAULT_LEVELS)[0] == list(DEFAULT_LEVELS)


@pytest.mark.parametrize(("n", "level"), [(30, 80), (30, 90), (15, 80), (4, 80)])
def test_the_coverage_spread_is_what_repeated_calibrations_show(n: int, level: float) -> None:
    """Calibrate on n fresh exchangeable scores many times; the coverage each interval attains on new
    data varies with exactly the standard deviation `coverage_spread` states (the threshold's reason)."""
    rng = np.random.default_rng(0)
    scores = rng.uniform(size=(20_000, n))  # uniform scores: the coverage of width w is w itself
    widths = np.array([conformal_quantile(row, level / 100) for row in scores])
    assert 100 * widths.std() == pytest.approx(coverage_spread(n, level), rel=0.03)
    assert coverage_spread(30, 80) == pytest.approx(7.0, abs=0.05)
    assert coverage_spread(30, 90) == pytest.approx(5.2, abs=0.05)
