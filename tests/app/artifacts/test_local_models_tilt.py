"""The hybrid's weights tilted by series features (app/artifacts/hybrid.py `Tilt`,
`series_features`, `LocalSpec.series_weights`): what each feature measures, the per-series weights the
feed hands the graph, and the `panel.local` block's round trip with a tilt (schema 2) and without one
(schema 1, as before)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.artifacts.hybrid import FEATURES, LocalSpec, Tilt, series_features, softmax_weights
from app.artifacts.local_models import fit_forecast

H = 6
MEMBERS = ("theta", "damped")
F = len(FEATURES)


def padded(values: list[np.ndarray], length: int) -> np.ndarray:
    x = np.full((len(values), length), np.nan)
    for i, v in enumerate(values):
        x[i, length - len(v) :] = v[-length:]
    return x


def tilt_on(feature: str, row: int, slope: float) -> Tilt:
    """A tilt that moves one member's (row 1..) or the read-out's (row 0) logit by `slope` per unit of
    one feature (center 0, scale 1)."""
    coef = np.zeros((len(MEMBERS) + 1, F))
    coef[row, FEATURES.index(feature)] = slope
    return Tilt((0.0,) * F, (1.0,) * F, tuple(tuple(r) for r in coef))


def spec(tilt: Tilt | None = None, length: int = 48) -> LocalSpec:
    return LocalSpec(MEMBERS, (1 / 3, 1 / 3), length, 12, H, 24, tilt)


def test_the_features_measure_length_noise_trend_season_and_the_differences_autocorrelation() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(60)
    line = 10.0 + 2.0 * t
    seasonal = 50.0 * (1 + 0.3 * np.sin(2 * np.pi * t / 12)) + 0.1 * rng.standard_normal(60)
    walk = 100 + np.cumsum(rng.standard_normal(60))
    f = series_features(padded([line[-30:], seasonal, walk], 60), period=12)
    log_length, noise, trend, season, acf1 = (f[:, FEATURES.index(k)] for k in FEATURES)
    np.testing.assert_allclose(log_length, np.log([30, 60, 60]))  # the missing start is not counted
    np.testing.assert_allclose(trend[0], 1.0)  # a straight line
    assert noise[0] == pytest.approx(np.log(1e-4))  # its differences do not vary: the floor
    assert season[1] > 0.1 and season[0] == 0.0 and season[2] == 0.0  # only the seasonal one adjusted
    assert acf1[1] > 0.5  # the season's differences follow each other; a random walk's do not
    assert abs(acf1[2]) < 0.4
    # Without a cycle the season is 0; one series alone equals it among the others.
    assert np.all(series_features(padded([seasonal], 60), period=1)[:, FEATURES.index("season")] == 0)
    np.testing.assert_allclose(series_features(padded([walk], 60), 12)[0], f[2], rtol=1e-12)


def test_a_zero_tilt_serves_the_base_weights() -> None:
    rng = np.random.default_rng(1)
    x = padded([50 + np.cumsum(rng.standard_normal(n)) for n in (48, 40, 20)], 48)
    zero = Tilt((0.0,) * F, (1.0,) * F, ((0.0,) * F,) * 3)
    base_local, base_weight = spec().feed(x, 24)
    local, weight = spec(zero).feed(x, 24)
    np.testing.assert_allclose(local, base_local, rtol=1e-12)
    np.testing.assert_allclose(weight, base_weight, rtol=1e-12)
    np.testing.assert_allclose(weight[:, 0], [2 / 3, 2 / 3, 0.0])  # 20 values < min_values 24


def test_the_feed_weighs_each_series_by_its_own_features() -> None:
    rng = np.random.default_rng(2)
    short, long = 40 + np.cumsum(rng.standard_normal(30)), 40 + np.cumsum(rng.standard_normal(48))
    x = padded([short, long, short[-10:]], 48)
    tilted = spec(tilt_on("log_length", 2, 3.0))  # the damped trend gains on longer windows
    w = tilted.series_weights(x)
    want = softmax_weights(np.full(3, 1 / 3), 3.0 * np.log([[1, 1, 30], [1, 1, 48]]) * [0, 0, 1])
    np.testing.assert_allclose(w[:2], want, rtol=1e-12)
    np.testing.assert_array_equal(w[2], [1.0, 0.0, 0.0])  # too short: the read-out alone
    assert w[1, 2] > w[0, 2] > 1 / 3
    local, weight = tilted.feed(x, 24)
    fc = fit_forecast(x[:2], 12, H, MEMBERS)
    np.testing.assert_allclose(local[:2], w[:2, 1:2] * fc["theta"] + w[:2, 2:3] * fc["damped"], rtol=1e-12)
    np.testing.assert_allclose(weight[:, 0], 1 - w[:, 0], rtol=1e-12)
    g = np.full((3, H), 7.0)
    np.testing.assert_allclose(tilted.combine(g, x, 24), w[:, :1] * g + local, rtol=1e-12)
    # One series alone gets the weights it gets among the others.
    np.testing.assert_allclose(tilted.series_weights(x[1:2]), w[1:2], rtol=1e-12)


def test_the_tilted_block_round_trips_as_schema_2_and_the_plain_one_stays_schema_1() -> None:
    plain = spec()
    assert plain.to_json()["schema"] == 1 and "tilt" not in plain.to_json()
    tilted = spec(tilt_on("trend_r2", 1, -0.5))
    d = tilted.to_json()
    assert d["schema"] == 2 and len(d["tilt"]["coef"]) == 3
    assert LocalSpec.from_json(d) == tilted
    assert LocalSpec.from_json(plain.to_json()) == plain
    with pytest.raises(ValueError, match="incomplete"):
        LocalSpec.from_json({**plain.to_json(), "schema": 2})  # schema 2 without its tilt
    with pytest.raises(ValueError, match="one row per member"):
        LocalSpec.from_json({**d, "tilt": {**d["tilt"], "coef": d["tilt"]["coef"][:2]}})
    with pytest.raises(ValueError, match="scales must be > 0"):
        Tilt((0.0,) * F, (0.0,) * F, ((0.0,) * F,) * 3)
    with pytest.raises(ValueError, match="finite"):
        Tilt((float("nan"),) * F, (1.0,) * F, ((0.0,) * F,) * 3)
    with pytest.raises(ValueError, match="base weights must all be > 0"):
        dataclasses.replace(tilted, weights=(0.5, 0.5))  # the read-out's base weight 0


def test_degenerate_windows_get_finite_features_and_weights() -> None:
    rows = [
        np.zeros(48),
        np.full(48, 3.0),
        -np.arange(48.0),
        np.array([5.0]),
        np.array([]),
        1e12 + np.arange(48.0),
    ]
    x = padded(rows, 48)
    f = series_features(x, period=12)
    assert np.isfinite(f).all()
    w = spec(tilt_on("log_noise", 1, 2.0)).series_weights(x)
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w.sum(1), 1.0)
    np.testing.assert_array_equal(w[[3, 4]], [[1.0, 0.0, 0.0]] * 2)  # too short: the read-out alone
