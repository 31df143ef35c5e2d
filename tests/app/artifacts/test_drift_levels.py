"""The drift rule's high levels and its check (app/artifacts/readout/calibration.py): a level whose
quantile rests on a few windows takes the factor of the level below, and the rule is kept only where it
would have helped one origin earlier."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.artifacts import readout
from export.global_models.calibration import readout_spec
from export.global_models.config import PanelConfig
from export.global_models.search import train_global

CFG = PanelConfig(horizon=6, period=12, bank={"regular": [0.5, 0.9]})


def test_a_level_beyond_the_last_twenty_windows_takes_the_factor_of_the_level_below() -> None:
    """600 windows: 95% leaves 30 beyond its quantile, 99% 6. Only the 8 largest of the earlier origin
    are 10 times larger (a few wild windows), so the raw 99% ratio is far below the 95% one; the rule
    gives 99% the 95% factor, and the widths stay strictly increasing across levels."""
    rng = np.random.default_rng(3)
    earlier = rng.exponential(1.0, (600, 6))
    later = 0.8 * earlier
    wild = np.argsort(earlier, axis=0)[-8:]  # each step's 8 largest earlier scores
    np.put_along_axis(earlier, wild, np.take_along_axis(earlier, wild, 0) * 10, 0)
    levels = [50.0, 80.0, 95.0, 99.0]
    raw = [readout.drift_factor(later, earlier, lv) for lv in levels]
    assert raw[3] < 0.2 < 0.75 < raw[2]  # the noise the rule keeps out
    factors = readout.level_factors(later, earlier, levels)
    assert factors[:3] == pytest.approx([0.8, 0.8, 0.8])
    assert factors[3] == factors[2]
    widths = np.asarray(readout.pooled_intervals(later, levels, 24, 12, factors)["widths"])[:, :, 0]
    assert (np.diff(widths, axis=0) > 0).all()
    # too few windows for any level's tail: no factor at all
    assert readout.level_factors(later[:30], earlier[:30], [50.0, 80.0]) == [1.0, 1.0]


def test_the_check_keeps_the_factors_only_where_they_moved_coverage_towards_the_levels() -> None:
    rng = np.random.default_rng(4)
    levels = [50.0, 80.0]
    base = rng.exponential(1.0, (2000, 6))
    earlier, later = 2 * base, base.copy()  # the scores halved from one origin to the next
    still = rng.exponential(1.0, (2000, 6))  # ... and then stayed: halving again under-covers
    said = readout.drift_check(still, later, earlier, levels)
    assert not said["kept"]
    assert said["coverage_drift"]["80"] < 0.7 < said["coverage_plain"]["80"]
    assert abs(said["coverage_plain"]["80"] - 0.8) < 0.03
    falling = 0.5 * rng.exponential(1.0, (2000, 6))  # ... and kept falling: the factors help
    said = readout.drift_check(falling, later, earlier, levels)
    assert said["kept"] and abs(said["coverage_drift"]["80"] - 0.8) < 0.03
    assert said["windows"] == 2000


def noise_steps(n_series: int, length: int, sigmas: dict[int, float]) -> list[np.ndarray]:
    """Seasonal series whose noise (a share of the level) is sigmas[s] from step s on."""
    rng = np.random.default_rng(7)
    t = np.arange(length)
    sigma = np.zeros(length)
    for start, value in sorted(sigmas.items()):
        sigma[t >= start] = value
    return [
        (100.0 + 10 * i) * (1 + 0.3 * np.sin(2 * np.pi * t / 12) + sigma * rng.standard_normal(length))
        for i in range(n_series)
    ]


def test_calibrate_drops_the_factors_that_fail_their_check_and_says_so() -> None:
    """Noise loud up to 2H values before the end and quiet after: the origin H values before the last
    scored quieter than the one before it (factors well below 1), but the last no quieter than that, so
    the factors fail their check: the widths are the plain quantiles and the block says why."""
    H = 6
    series = noise_steps(120, 90, {0: 0.10, 90 - 2 * H: 0.02})
    spec = readout_spec(train_global(series, dataclasses.replace(CFG, irls=0)))
    levels, tail = [50.0, 80.0], lambda n: H
    plain = readout.calibrate(series, spec, levels, tail)
    drift = readout.calibrate(series, spec, levels, tail, drift=True)
    assert plain.intervals is not None and drift.intervals is not None
    said = drift.intervals["calibration"]
    assert said["rule"] == "split_conformal"
    check = said["drift"]["check"]
    assert check["kept"] is False and check["windows"] == 120
    assert check["coverage_drift"]["80"] < check["coverage_plain"]["80"]
    assert drift.intervals["widths"] == plain.intervals["widths"]


def test_calibrate_keeps_the_factors_that_pass_their_check() -> None:
    """Noise falling at every origin: the factors pass their check and set the widths."""
    H = 6
    series = noise_steps(120, 90, {0: 0.20, 90 - 3 * H: 0.10, 90 - 2 * H: 0.05, 90 - H: 0.025})
    spec = readout_spec(train_global(series, dataclasses.replace(CFG, irls=0)))
    levels, tail = [50.0, 80.0], lambda n: H
    plain = readout.calibrate(series, spec, levels, tail)
    drift = readout.calibrate(series, spec, levels, tail, drift=True)
    assert plain.intervals is not None and drift.intervals is not None
    said = drift.intervals["calibration"]
    assert said["rule"] == "split_conformal_drift" and said["drift"]["check"]["kept"] is True
    assert all(f < 0.8 for f in said["drift"]["factors"].values())
    assert np.all(np.asarray(drift.intervals["widths"]) < np.asarray(plain.intervals["widths"]))


def test_no_third_origin_keeps_the_factors_and_says_why() -> None:
    """Series long enough for two origins but not a third: the factors stand unchecked."""
    H = 6
    series = noise_steps(60, 80, {0: 0.10, 80 - H: 0.02})
    spec = readout_spec(train_global(series, dataclasses.replace(CFG, irls=0)))
    short = [v[:46] for v in series]  # 46 - 2·6 = 34 values to fit on before the 2nd origin, 28 the 3rd
    drift = readout.calibrate(short, spec, [50.0, 80.0], lambda n: H, drift=True)
    assert drift.intervals is not None
    said = drift.intervals["calibration"]["drift"]
    assert said["factors"] is not None and "why" in said["check"]
