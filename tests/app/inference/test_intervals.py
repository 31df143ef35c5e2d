"""The interval arithmetic every protocol shares: bounds = forecast ± the artifact's widths, in float32."""

from __future__ import annotations

import numpy as np
import pytest

from app.artifacts.manifest import IntervalsSpec
from app.core.errors import InvalidInput
from app.inference.intervals import (
    MAX_REQUESTED,
    available_quantiles,
    check_levels,
    check_quantiles,
    level_bounds,
    quantile_bounds,
)

LEVELS = (50.0, 80.0, 90.0, 95.0, 99.0)
H, C = 6, 3


def spec(levels: tuple[float, ...] = LEVELS) -> IntervalsSpec:
    rng = np.random.default_rng(0)
    # Widening with the level and with the step, as calibrated widths do; float32 values with many digits.
    base = np.sort(rng.uniform(0.1, 2.0, size=(len(levels), 1, C)), axis=0)
    widths = (base * np.linspace(1.0, 1.5, H)[None, :, None]).astype(np.float32)
    return IntervalsSpec(
        method="split_conformal",
        residuals="absolute",
        scale="none",
        levels=levels,
        widths=widths.astype(np.float64).tolist(),
    )


def forecast(series: int = 2, horizon: int = H) -> np.ndarray:
    return np.random.default_rng(1).normal(100.0, 30.0, size=(series, horizon, C)).astype(np.float32)


def test_level_bounds_are_the_forecast_plus_and_minus_the_widths_exactly() -> None:
    s, f = spec(), forecast()
    bounds = level_bounds(s, f, [80, 95])
    assert list(bounds) == [80, 95]
    for level, (lo, hi) in bounds.items():
        w = s.array[LEVELS.index(level)]
        assert lo.dtype == hi.dtype == np.float32 and lo.shape == f.shape
        np.testing.assert_array_equal(lo, f - w)
        np.testing.assert_array_equal(hi, f + w)
        assert (lo <= f).all() and (f <= hi).all()


def test_bounds_widen_with_the_level() -> None:
    bounds = level_bounds(spec(), forecast(), list(LEVELS))
    los = np.stack([lo for lo, _ in bounds.values()])
    his = np.stack([hi for _, hi in bounds.values()])
    assert (np.diff(los, axis=0) <= 0).all() and (np.diff(his, axis=0) >= 0).all()


def test_a_shorter_horizon_takes_the_first_steps_widths() -> None:
    s, f = spec(), forecast(horizon=2)
    lo, hi = level_bounds(s, f, [90])[90]
    np.testing.assert_array_equal(hi, f + s.array[2, :2])
    np.testing.assert_array_equal(lo, f - s.array[2, :2])


def test_quantiles_map_onto_levels_the_timegpt_way() -> None:
    s, f = spec(), forecast()
    probabilities = [0.05, 0.5, 0.9, 0.005, 0.995, 0.25]
    q = quantile_bounds(s, f, probabilities)
    assert q.shape == (6, *f.shape) and q.dtype == np.float32
    np.testing.assert_array_equal(q[0], f - s.array[2])  # 0.05: lower bound of 90
    np.testing.assert_array_equal(q[1], f)  # the median is the point forecast
    np.testing.assert_array_equal(q[2], f + s.array[1])  # 0.9: upper bound of 80
    np.testing.assert_array_equal(q[3], f - s.array[4])  # 0.005: lower bound of 99
    np.testing.assert_array_equal(q[4], f + s.array[4])
    np.testing.assert_array_equal(q[5], f - s.array[0])  # 0.25: lower bound of 50
    ordered = quantile_bounds(s, f, available_quantiles(s))
    assert (np.diff(ordered, axis=0) >= 0).all()  # quantiles never cross
    assert available_quantiles(s) == pytest.approx(
        [0.005, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975, 0.995]
    )


@pytest.mark.parametrize(
    ("levels", "field", "limit"),
    [
        ([85], "level[0]", list(LEVELS)),
        ([80, 0], "level[1]", [0.0, 100.0]),
        ([100], "level[0]", [0.0, 100.0]),
        ([-5], "level[0]", [0.0, 100.0]),
        ([80, 95, 80], "level[2]", None),
        ([80, 95, 80 + 1e-12], "level[2]", None),  # the same calibrated level, within float noise
        ([], "level", 1),
        ([float(v) for v in range(1, MAX_REQUESTED + 2)], "level", MAX_REQUESTED),
    ],
)
def test_bad_levels_name_the_field(levels: list[float], field: str, limit: object) -> None:
    with pytest.raises(InvalidInput) as info:
        check_levels(spec(), levels)
    assert info.value.field == field and info.value.limit == limit
    if field == "level[0]" and limit == list(LEVELS):
        assert "available: 50, 80, 90, 95, 99" in info.value.message


@pytest.mark.parametrize(
    ("probabilities", "field"),
    [
        ([0.3], "quantiles[0]"),
        ([0.1, 1.0], "quantiles[1]"),
        ([0.0], "quantiles[0]"),
        ([0.9, 0.9], "quantiles[1]"),
        ([0.1, 0.5, 0.1 + 1e-12], "quantiles[2]"),  # both q-10: one array would have disappeared
        ([0.5, 0.5], "quantiles[1]"),
    ],
)
def test_bad_quantiles_name_the_field(probabilities: list[float], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_quantiles(spec(), probabilities)
    assert info.value.field == field


def test_a_protocol_names_its_own_field() -> None:
    with pytest.raises(InvalidInput) as info:
        quantile_bounds(spec(), forecast(), [0.3], field="parameters.quantiles")
    assert info.value.field == "parameters.quantiles[0]"
    assert "0.005, 0.025" in info.value.message


def test_a_model_without_intervals_is_a_clear_error() -> None:
    for call, field in (
        (lambda: level_bounds(None, forecast(), [80]), "level"),
        (lambda: quantile_bounds(None, forecast(), [0.1]), "quantiles"),
    ):
        with pytest.raises(InvalidInput) as info:
            call()
        assert info.value.field == field and "no prediction intervals" in info.value.message


def test_nonnegative_channels_have_their_bounds_clipped_at_zero_for_levels_and_quantiles() -> None:
    """A channel the manifest marks never negative gets bounds of at least 0 (a spend column's `lo-80`
    is never −79); the others, and the forecast itself (q = 0.5), are untouched."""
    flags = (True, False, True)
    s = spec().model_copy(update={"nonnegative": flags})
    f = forecast()
    f[..., 0] = np.float32(0.5)  # near zero: forecast - width < 0 on the flagged channels
    f[..., 1] = np.float32(-5.0)  # an unflagged channel keeps its negative bounds
    f[0, 0, 2] = np.float32(-3.0)  # a forecast below zero: even its upper bound may be raised to 0
    plain = level_bounds(spec(), f, [95])[95]
    lo, hi = level_bounds(s, f, [95])[95]
    np.testing.assert_array_equal(lo, np.where(flags, np.maximum(plain[0], 0), plain[0]))
    np.testing.assert_array_equal(hi, np.where(flags, np.maximum(plain[1], 0), plain[1]))
    assert (lo[..., 0] == 0).all() and (lo[..., 1] < 0).all() and lo.dtype == np.float32
    q = quantile_bounds(s, f, [0.025, 0.5, 0.975])
    np.testing.assert_array_equal(q[0], lo)
    np.testing.assert_array_equal(q[2], hi)
    np.testing.assert_array_equal(q[1], f)  # the forecast is the model's, never clipped
    assert f[0, 0, 2] == np.float32(-3.0)  # and the caller's array is left as it was


def scaled_spec(statistic: str = "std", rows: int = 5, power: float = 1.0) -> IntervalsSpec:
    base = spec()
    return IntervalsSpec(
        method="split_conformal",
        residuals="absolute",
        scale="window",
        window_scale={"statistic": statistic, "rows": rows, "power": power, "floor": [0.5, 0.5, 0.5]},
        levels=LEVELS,
        widths=base.array.astype(np.float64).tolist(),
    )


def raw_windows(series: int = 2, length: int = 8) -> np.ndarray:
    w = np.random.default_rng(2).normal(50.0, 4.0, size=(series, length, C)).astype(np.float32)
    w[1, :, 2] = 7.0  # a flat channel: its spread is the floor
    return w


@pytest.mark.parametrize(("statistic", "rows", "power"), [("std", 5, 1.0), ("mean_abs_diff", 8, 0.5)])
def test_window_scaled_widths_follow_each_series_spread(statistic: str, rows: int, power: float) -> None:
    """scale "window": bound = forecast ± width · s, s per series and channel from its own window's last
    `rows` rows (floored, to a power), the same for levels and quantiles."""
    s, f, w = scaled_spec(statistic, rows, power), forecast(), raw_windows()
    tail = w[:, -rows:].astype(np.float64)
    stat = tail.std(axis=1) if statistic == "std" else np.abs(np.diff(tail, axis=1)).mean(axis=1)
    scale = (np.maximum(stat, 0.5) ** power).astype(np.float32)[:, None, :]  # [S, 1, C]
    assert scale[1, 0, 2] == np.float32(0.5**power)  # the flat channel
    lo, hi = level_bounds(s, f, [90], window=w)[90]
    np.testing.assert_array_equal(hi, f + s.array[2] * scale)
    np.testing.assert_array_equal(lo, f - s.array[2] * scale)
    q = quantile_bounds(s, f[:, :2], [0.05, 0.5, 0.95], window=w)  # a shorter horizon: first steps
    np.testing.assert_array_equal(q[0], f[:, :2] - s.array[2, :2] * scale)
    np.testing.assert_array_equal(q[2], f[:, :2] + s.array[2, :2] * scale)
    assert not np.array_equal(hi[0] - f[0], hi[1] - f[1])  # each series its own width


def test_window_scaled_intervals_need_the_windows() -> None:
    with pytest.raises(ValueError, match="pass the windows"):
        level_bounds(scaled_spec(), forecast(), [80])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"window_scale": None}, "exactly when"),
        ({"scale": "none"}, "exactly when"),
        ({"window_scale": {"statistic": "std", "rows": 5, "floor": [0.0, 1.0, 1.0]}}, "floor"),
        ({"window_scale": {"statistic": "iqr", "rows": 5, "floor": [1.0, 1.0, 1.0]}}, "statistic"),
    ],
)
def test_window_scale_spec_is_checked(change: dict, message: str) -> None:
    raw = {**scaled_spec().model_dump(), **change}
    with pytest.raises(ValueError, match=message):
        IntervalsSpec.model_validate(raw)


def history_spec(rows: int = 8, edges: tuple[int, ...] = (2, 3, 6)) -> IntervalsSpec:
    """scaled_spec's widths for full windows, and one block per pair of `edges`, each wider than the next."""
    base = scaled_spec("mean_abs_diff", rows).array.astype(np.float64)
    blocks = [base * 2.0 * (len(edges) - 1 - k) for k in range(len(edges) - 1)]  # 4x, 2x
    return IntervalsSpec.model_validate(
        {
            **scaled_spec("mean_abs_diff", rows).model_dump(),
            "history": {"values": list(edges), "widths": [b.tolist() for b in blocks]},
        }
    )


def test_a_window_holding_few_values_takes_the_widths_of_its_block() -> None:
    """`intervals.history`: per series and channel, the observed values in the window's last `rows`
    rows pick the block (values[k] to values[k + 1] − 1; from the last edge on, the main widths; below the
    first, the first block), times that window's own spread, for levels and quantiles alike."""
    s = history_spec()
    w = np.random.default_rng(3).normal(50.0, 4.0, size=(4, 10, C)).astype(np.float32)
    seen = np.array([[2, 3, 5], [6, 8, 10], [1, 2, 7], [3, 4, 6]])  # values per series and channel
    for i, j in np.ndindex(seen.shape):
        w[i, : 10 - seen[i, j], j] = np.nan
    f = forecast(4)
    lo, hi = level_bounds(s, f, [80], window=w)[80]
    scale = s.window_scale.scale(w) if s.window_scale is not None else None
    assert scale is not None
    by_block = {0: s.array * 4.0, 1: s.array * 2.0, 2: s.array}  # [K, H, C] each
    for i, j in np.ndindex(seen.shape):
        n = min(seen[i, j], 8)
        block = 0 if n < 3 else 1 if n < 6 else 2
        want = by_block[block][1, :, j] * scale[i, 0, j]
        np.testing.assert_allclose(hi[i, :, j] - f[i, :, j], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(f[i, :, j] - lo[i, :, j], want, rtol=1e-5, atol=1e-5)
    q = quantile_bounds(s, f[:, :2], [0.1, 0.9], window=w)  # a shorter horizon: the blocks' first steps
    np.testing.assert_allclose(q[1], hi[:, :2], rtol=1e-6)
    np.testing.assert_allclose(q[0], lo[:, :2], rtol=1e-6)


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ({"values": [2, 9], "widths": "block"}, "at most window_scale.rows"),
        ({"values": [3, 2], "widths": "block"}, "strictly increasing"),
        ({"values": [2, 4, 6], "widths": "block"}, r"must be \[2, 5, 6, 3\]"),
        ({"values": [2, 4], "widths": "narrowing"}, "never narrowing"),
    ],
)
def test_history_widths_are_checked(history: dict, message: str) -> None:
    base = scaled_spec("mean_abs_diff", 8).array.astype(np.float64)
    block = base[::-1] if history["widths"] == "narrowing" else base
    raw = {**scaled_spec("mean_abs_diff", 8).model_dump(), "history": {**history, "widths": [block.tolist()]}}
    with pytest.raises(ValueError, match=message):
        IntervalsSpec.model_validate(raw)
    with pytest.raises(ValueError, match=r"needs intervals\.scale"):
        IntervalsSpec.model_validate(
            {**spec().model_dump(), "history": {"values": [2, 4], "widths": [base.tolist()]}}
        )
