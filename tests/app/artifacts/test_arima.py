"""The automatic seasonal ARIMA member (app/artifacts/arima.py): its tests choose the differences a process
needs, the order it finds forecasts as the process's own recursion does, and a missing start is read as
no values at all."""

from __future__ import annotations

import numpy as np

from app.artifacts.arima import _kpss_rejects, arima, seasonal_strength


def _ar(phi: list[float], n: int, seed: int, mean: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.standard_normal(n + 200)
    z = np.zeros(n + 200)
    for t in range(len(phi), len(z)):
        z[t] = sum(p * z[t - 1 - i] for i, p in enumerate(phi)) + e[t]
    return mean + z[200:]


def test_kpss_keeps_stationary_series_and_differences_random_walks() -> None:
    stationary = np.stack([_ar([0.5], 120, seed) for seed in range(40)])
    walks = np.cumsum(np.random.default_rng(1).standard_normal((40, 120)), 1)
    # A 5% test: about 2 of 40 stationary series rejected; a random walk of 120 steps almost always.
    assert _kpss_rejects(stationary).sum() <= 6
    assert _kpss_rejects(walks).sum() >= 34
    assert not _kpss_rejects(np.full((1, 50), 3.0))[0]


def test_seasonal_strength_tells_a_cycle_from_noise() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(96)
    cycle = 10 * np.sin(2 * np.pi * t / 12) + 0.05 * t + rng.standard_normal(96)
    noise = rng.standard_normal(96)
    strength = seasonal_strength(np.stack([cycle, noise]), 12)
    assert strength[0] > 0.9 and strength[1] < 0.3


def test_an_ar1_is_forecast_by_its_own_decay() -> None:
    """On a long AR(1) (φ 0.7, mean 50) the forecast decays to the mean as φ^h does, within the noise of
    the estimates."""
    x = _ar([0.7], 600, seed=5, mean=50.0)[None, :]
    f = arima(x, period=1, horizon=8)[0]
    h = np.arange(1, 9)
    want = 50.0 + 0.7**h * (x[0, -1] - 50.0)
    np.testing.assert_allclose(f, want, atol=0.25 + 0.05 * abs(x[0, -1] - 50.0))


def test_a_trend_and_a_fixed_season_are_continued_exactly() -> None:
    """A linear trend plus a fixed cycle: one seasonal difference leaves a constant (the drift), which the
    forecast carries on: the series itself, continued."""
    shape = np.array([3.0, -1.0, 4.0, 1.0, -5.0, 9.0, -2.0, 6.0, -5.0, 3.0, 5.0, -8.0])
    t = np.arange(120)
    series = 100 + 0.5 * t + np.tile(shape, 10)
    f = arima(series[None, :96], period=12, horizon=24)[0]
    np.testing.assert_allclose(f, series[96:], rtol=1e-9)


def test_a_random_walk_with_drift_is_differenced_once() -> None:
    rng = np.random.default_rng(7)
    walk = 20 + np.cumsum(2.0 + 0.1 * rng.standard_normal(200))
    f = arima(walk[None, :], period=1, horizon=5)[0]
    drift = np.diff(walk).mean()
    np.testing.assert_allclose(f, walk[-1] + drift * np.arange(1, 6), atol=0.2)


def test_a_missing_start_is_no_values_and_series_are_independent() -> None:
    """A series' forecast is the same alone, beside others, and behind a longer missing start."""
    rng = np.random.default_rng(11)
    a = 50 + np.cumsum(rng.standard_normal(60)) + 5 * np.tile([1.0, -1.0, 2.0, -2.0], 15)
    b = _ar([0.4, 0.2], 80, seed=2, mean=10.0)
    wide = np.full((2, 90), np.nan)
    wide[0, -60:], wide[1, -80:] = a, b
    together = arima(wide, period=4, horizon=6)
    np.testing.assert_allclose(together[0], arima(a[None, :], 4, 6)[0], rtol=1e-10)
    np.testing.assert_allclose(together[1], arima(b[None, :], 4, 6)[0], rtol=1e-10)
