"""The backtest's metrics computed once for every part it reports (app/inference/metrics.py): the seasonal
naive of many cutoffs from one fill, and the summaries of slices of one set of point errors, each the same
numbers, bit for bit, as the per-cutoff and per-slice forms they replace."""

from __future__ import annotations

import numpy as np
import pytest

from app.inference.metrics import PointErrors, accuracy, seasonal_naive, seasonal_naive_at


def _one_fill_per_cutoff(history: np.ndarray, horizon: int, period: int) -> np.ndarray:
    """The rule written per cutoff, as the service computed it before: fill forward, repeat the last
    season (m = period where the history is longer than a period, else 1)."""
    x = history[:, None] if history.ndim == 1 else history
    n = len(x)
    m = period if n > period else 1
    filled = np.full_like(x, np.nan)
    for c in range(x.shape[1]):
        seen = np.nan
        for i in range(n):
            seen = x[i, c] if not np.isnan(x[i, c]) else seen
            filled[i, c] = seen
    out = filled[n - m :][np.arange(horizon) % m]
    return out[:, 0] if history.ndim == 1 else out


@pytest.mark.parametrize("seed", range(40))
def test_the_seasonal_naive_of_many_cutoffs_is_each_cutoffs_own(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, channels = int(rng.integers(1, 50)), int(rng.integers(1, 4))
    period, horizon = int(rng.integers(1, 13)), int(rng.integers(1, 30))
    history = rng.normal(size=(n, channels))
    history[rng.random(history.shape) < 0.3] = np.nan  # gaps, and some columns starting with them
    if seed % 2:
        history = history[:, 0]
    ends = sorted(rng.integers(1, n + 1, size=6).tolist())
    many = seasonal_naive_at(history, ends, horizon, period)
    for i, t in enumerate(ends):
        expected = _one_fill_per_cutoff(history[:t], horizon, period)
        np.testing.assert_array_equal(many[i], expected)
        np.testing.assert_array_equal(seasonal_naive(history[:t], horizon, period), expected)


@pytest.mark.parametrize("gaps", [False, True])
def test_slices_of_one_set_of_point_errors_summarise_as_each_slice_alone(gaps: bool) -> None:
    rng = np.random.default_rng(3)
    actual = rng.normal(size=(64, 12, 3))
    if gaps:
        actual[rng.random(actual.shape) < 0.1] = np.nan
    forecast = actual + rng.normal(size=actual.shape)
    forecast[0, 0, 0] = -actual[0, 0, 0] if not np.isnan(actual[0, 0, 0]) else 0.0  # a zero sMAPE denominator
    scale = np.abs(rng.normal(size=(64, 1, 3))) + 0.1
    bounds = {80.0: (forecast - 1.0, forecast + 1.0), 95.0: (forecast - 2.0, forecast + 2.0)}
    errors = PointErrors.of(actual, forecast, scale, bounds)
    for at in [
        (slice(None), slice(None), slice(None)),
        (slice(0, 16), slice(None), slice(None)),
        (slice(16, 64), slice(None), 1),
        (slice(None), slice(None), 2),
    ]:
        alone = accuracy(
            actual[at],
            forecast[at],
            np.broadcast_to(scale, actual.shape)[at],
            {k: (lo[at], hi[at]) for k, (lo, hi) in bounds.items()},
        )
        assert errors.summary(at) == alone
    assert errors.summary().points == int((~np.isnan(actual)).sum())
