"""app/artifacts/readout.py (the global read-out's numpy home) and app/artifacts/initializers.py (a graph's
constants replaced without the onnx package): the manifest block round trip and its refusals, the feature
cache between IRLS passes changing no number, and the initializer rewrite read back by ONNX Runtime."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from app.artifacts import readout
from app.artifacts.conformal import conformal_quantile
from app.artifacts.initializers import replace_initializers
from export.global_models.config import PanelConfig
from export.global_models.onnx import export_global, readout_spec, run_graph
from export.global_models.search import train_global
from tests.utils.panel import store


def panel() -> list[np.ndarray]:
    return [store(i, 40 + 3 * i) for i in range(12)]


CFG = PanelConfig(horizon=6, period=12, input_periods=2, irls=2)


def test_the_readout_block_round_trips_and_refuses_what_it_cannot_read() -> None:
    spec = readout_spec(train_global(panel(), CFG))
    assert readout.ReadoutSpec.from_json(spec.to_json()) == spec
    with pytest.raises(ValueError, match="schema 1"):
        readout.ReadoutSpec.from_json({**spec.to_json(), "schema": 2})
    broken = spec.to_json()
    del broken["ridge"]
    with pytest.raises(ValueError, match="incomplete or malformed"):
        readout.ReadoutSpec.from_json(broken)


def test_features_kept_between_passes_change_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    series, fit = panel(), CFG.fit_settings
    kernels = readout.rem_kernels(readout_spec(train_global(series, CFG)).heads, 24)
    cached = readout.fit_weights(series, fit, kernels)
    monkeypatch.setattr(readout.fit, "CACHE_ROWS", 0)  # every pass reads the series again
    np.testing.assert_array_equal(readout.fit_weights(series, fit, kernels), cached)


def test_a_long_series_is_read_in_buffers_and_changes_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """A series of more windows than a buffer holds is cut into buffers (its [n, L] inputs all at once took
    8 GB for 67,849 five-minute values): the same normal equations, summed in another order."""
    series, fit = [store(0, 400), store(1, 60)], CFG.fit_settings
    kernels = readout.rem_kernels(readout_spec(train_global(panel(), CFG)).heads, 24)
    whole = readout.fit_weights(series, fit, kernels)
    monkeypatch.setattr(readout.fit, "BUFFER_ROWS", 7)  # the 400-value series in 55 buffers
    np.testing.assert_allclose(readout.fit_weights(series, fit, kernels), whole, rtol=1e-5, atol=1e-8)


def test_a_fit_reads_at_most_max_fit_windows_of_a_series_evenly_and_its_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past MAX_FIT_WINDOWS windows a fit reads every k-th counted back from the last (the fewest k that
    keeps at most that many); the fit's cost estimate (`training_windows`) counts the same windows, and a
    fit on the series equals the fit on those windows alone."""
    monkeypatch.setattr(readout.windows, "MAX_FIT_WINDOWS", 100)
    fit = CFG.fit_settings
    every = readout.window_ends(1000, fit.horizon, fit.train_min)
    ends = readout.windows.fit_ends(1000, fit.horizon, fit.train_min)
    step = -(-len(every) // 100)
    assert len(every) > 100 >= len(ends) > 100 - step and ends[-1] == every[-1]
    assert set(np.diff(ends)) == {step} and set(ends) <= set(every)
    assert readout.training_windows([np.ones(1000), np.ones(80)], fit) == [
        len(ends),
        len(readout.window_ends(80, fit.horizon, fit.train_min)),
    ]
    v = store(0, 1000)
    kernels = readout.rem_kernels(readout_spec(train_global(panel(), CFG)).heads, 24)
    plain = dataclasses.replace(fit, irls=0)
    eq = readout.fit.NormalEquations(len(kernels) + fit.n_lags + 1, fit.horizon)
    x, m, t = readout.windows.windows_at(v, 24, fit.horizon, ends)
    f, s = readout.features(x, m, fit.period, fit.n_lags, kernels)
    d = readout.naive_error(x, m, fit.period) / s
    eq.add(f, t / s[:, None], 1 / np.maximum(d, fit.mase_floor)[:, None] ** 2)
    np.testing.assert_allclose(readout.fit_weights([v], plain, kernels), eq.solve(fit.ridge)[0], rtol=1e-9)


def test_parity_errors_are_in_units_of_the_window_or_the_forecast_at_any_level() -> None:
    """The graphs' parity check (`scale_errors`): a forecast near zero from a window at level 25 is judged
    against 25, a forecast far above a small window against itself, and the same numbers read alike at
    any level."""
    histories = [np.full(24, 25.0), np.full(24, 0.01)]
    want = np.array([[0.01, 0.0], [5.0, 5.0]])
    got = want + np.array([[0.0005, 0.0], [0.0, 0.0005]])
    err = readout.scale_errors(got, want, histories, 24, 12)
    np.testing.assert_allclose(err, [[0.0005 / 25, 0.0], [0.0, 0.0005 / 5.0]])
    big = readout.scale_errors(got * 1e6, want * 1e6, [h * 1e6 for h in histories], 24, 12)
    np.testing.assert_allclose(big, err)
    zeros = readout.scale_errors(np.zeros((1, 2)), np.zeros((1, 2)), [np.zeros(24)], 24, 12)
    np.testing.assert_array_equal(zeros, 0.0)  # a window without a value: its scale is 1


def test_initializers_are_replaced_in_place_and_read_by_onnx_runtime(tmp_path: Path) -> None:
    model = train_global(panel(), CFG, frequency="1MS")
    folder = export_global(model, tmp_path, "stores")
    graph = (folder / "model.onnx").read_bytes()
    other = dataclasses.replace(model, weights=model.weights * 0.5 + 1.0)
    patched = replace_initializers(
        graph,
        {"readout": other.weights[:-1].astype(np.float32), "bias": other.weights[-1].astype(np.float32)},
    )
    assert len(patched) == len(graph) and patched != graph
    (tmp_path / "patched.onnx").write_bytes(patched)
    histories = panel()
    got = run_graph(tmp_path / "patched.onnx", histories, model.input_length)
    np.testing.assert_allclose(got, other.forecast(histories), rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match="holds"):
        replace_initializers(graph, {"bias": np.zeros(7, np.float32)})  # H = 6
    with pytest.raises(ValueError, match="no initializer"):
        replace_initializers(graph, {"nothing": np.zeros(6, np.float32)})


# -- the pooled widths (no drift correction: bench/drift_backtest.py measured it) ---------------------------


def test_pooled_intervals_are_each_levels_conformal_quantile_non_decreasing_across_levels() -> None:
    scores = np.random.default_rng(1).exponential(1.0, (100, 4))
    widths = np.asarray(readout.pooled_intervals(scores, [50.0, 80.0, 95.0], 24, 12)["widths"])[:, :, 0]
    for row, level in zip(widths, (50.0, 80.0, 95.0), strict=True):
        np.testing.assert_allclose(row, conformal_quantile(scores, level / 100))
    assert (np.diff(widths, axis=0) >= 0).all()


def test_a_level_beyond_the_windows_is_extrapolated_by_a_laplace_errors_ratio() -> None:
    """40 windows calibrate 95% (19 needed), not 99% (99): 99%'s widths are 95%'s times
    ln(1 − 0.99) / ln(1 − 0.95), the ratio of a Laplace error's |e| quantiles, so that scores with an
    exponential tail (|Laplace|) are covered at 99% on fresh draws, where a normal's ratio falls short."""
    rng = np.random.default_rng(3)
    scores = rng.exponential(1.0, (40, 4000))  # 4,000 horizon steps: each its own calibration
    widths = np.asarray(readout.pooled_intervals(scores, [80.0, 95.0, 99.0], 24, 12)["widths"])[:, :, 0]
    np.testing.assert_allclose(widths[2], widths[1] * np.log(0.01) / np.log(0.05))
    assert readout.calibration.tail_ratio(99.0, 95.0) == pytest.approx(1.5372, abs=1e-4)
    fresh = rng.exponential(1.0, (50, 4000))
    assert 0.985 < (fresh <= widths[2]).mean() < 0.995
    normal = 2.5758 / 1.9600  # z(0.995) / z(0.975): the ratio before
    assert (fresh <= widths[1] * normal).mean() < 0.985


def test_a_level_calibrated_by_the_largest_score_alone_is_at_least_the_level_below_extrapolated() -> None:
    """15 windows calibrate 80% by their 13th score and 90% by their largest (rank ceil(16·0.9) = 15):
    90% is held at least 80%'s width times the tail ratio, 95% extrapolated from that; a largest score
    above the floor stands. 40 windows calibrate every level by a lower rank: the plain quantiles."""
    ratio = readout.calibration.tail_ratio
    scores = np.stack([np.arange(1.0, 16.0), np.r_[np.arange(1.0, 15.0), 100.0]], axis=1)  # [15, 2]
    widths = np.asarray(readout.pooled_intervals(scores, [80.0, 90.0, 95.0], 8, 4)["widths"])[:, :, 0]
    np.testing.assert_allclose(widths[0], [13.0, 13.0])
    np.testing.assert_allclose(widths[1], [13.0 * ratio(90.0, 80.0), 100.0])
    np.testing.assert_allclose(widths[2], widths[1] * ratio(95.0, 90.0))
    floored = readout.calibration.floored_levels
    assert floored(15, [80.0, 90.0, 95.0]) == [90.0] and floored(15, [50.0, 90.0]) == [90.0]
    assert floored(8, [50.0, 80.0, 90.0]) == [80.0] and floored(8, [80.0, 90.0]) == [80.0]  # 50% unasked
    assert readout.calibration.floor_base(8, 80.0) == 50.0 and readout.calibration.floor_base(3, 50.0) is None
    assert floored(19, [80.0, 90.0, 95.0]) == [95.0] and floored(40, [80.0, 90.0, 95.0]) == []
    assert floored(112, [50.0, 80.0, 90.0, 95.0, 99.0]) == [99.0]
    many = np.random.default_rng(2).exponential(1.0, (40, 3))
    plain = np.asarray(readout.pooled_intervals(many, [80.0, 90.0, 95.0], 8, 4)["widths"])[:, :, 0]
    for row, level in zip(plain, (80.0, 90.0, 95.0), strict=True):
        np.testing.assert_allclose(row, conformal_quantile(many, level / 100))


def test_80_percent_from_8_windows_is_held_by_their_median() -> None:
    """8 windows (a lone yearly series) calibrate 80% by their largest score (rank ceil(9·0.8) = 8): 80% is
    held at least the median's width times Laplace's ratio (2.32), whether 50% is asked or not (a level's
    width does not depend on the others asked); 90% is extrapolated from that 80%."""
    ratio = readout.calibration.tail_ratio
    scores = np.r_[np.full(7, 1.0), 1.5][:, None]  # the largest, 1.5, below the median x 2.32
    widths = np.asarray(readout.pooled_intervals(scores, [50.0, 80.0, 90.0], 8, 1)["widths"])[:, :, 0]
    np.testing.assert_allclose(widths[:, 0], [1.0, ratio(80.0, 50.0), ratio(80.0, 50.0) * ratio(90.0, 80.0)])
    alone = np.asarray(readout.pooled_intervals(scores, [80.0, 90.0], 8, 1)["widths"])[:, :, 0]
    np.testing.assert_allclose(alone, widths[1:])


def test_levels_are_extrapolated_only_from_80_percent_or_more_and_a_refusal_says_how_many_windows() -> None:
    plan = readout.level_plan
    assert plan(3, [50.0, 80.0, 95.0]) == ([50.0], [], [80.0, 95.0])  # from the median of 3: a guess
    assert plan(4, [50.0, 80.0, 95.0, 99.9]) == ([50.0, 80.0], [95.0], [99.9])
    assert plan(10, [50.0, 95.0]) == ([50.0], [], [95.0])  # 80% not asked: nothing to extrapolate from
    assert plan(10, [90.0, 99.0]) == ([90.0], [99.0], [])
    said = readout.calibration.too_few(10, 95.0)
    assert "10 calibration windows" in said and "at least 19" in said and "4 with 80% asked" in said
    assert "asked beside" not in readout.calibration.too_few(3, 80.0)


def noise_change(n_series: int, length: int, change: int, before: float, after: float) -> list[np.ndarray]:
    """Seasonal series whose noise is `before` (a share of the level) up to step `change`, `after` from it."""
    rng = np.random.default_rng(7)
    t = np.arange(length)
    out = []
    for i in range(n_series):
        level = 100.0 + 10 * i
        sigma = np.where(t < change, before, after)
        out.append(level * (1 + 0.3 * np.sin(2 * np.pi * t / 12) + sigma * rng.standard_normal(length)))
    return out


def test_the_exporter_serves_the_plain_quantiles_where_the_scores_fell_towards_the_last_origin() -> None:
    """calibrate_global, one window per series: noise quieter in every series' last H values (where the
    drift rule served until 2026-12-04 narrowed every level's widths) gives each level's conformal
    quantile of the scores, and the manifest's calibration report names that rule and reads back."""
    from export.global_models.onnx import calibrate_global
    from export.reports import IntervalCalibration, from_dict

    series = noise_change(120, 80, 74, 0.10, 0.02)
    model = train_global(series, dataclasses.replace(CFG, irls=0))
    levels = [50.0, 80.0, 95.0]
    intervals, _ = calibrate_global(model, series, levels)
    assert intervals is not None
    report = from_dict(IntervalCalibration, intervals["calibration"])
    assert report.rule == "split_conformal" and report.drift is None
    cal = readout.calibrate(series, readout_spec(model), levels, lambda n: 6)
    assert cal.windows == 120 and cal.intervals is not None
    assert intervals["widths"] == cal.intervals["widths"]
    want = readout.pooled_intervals(cal.scores, levels, model.input_length, 12)["widths"]
    assert intervals["widths"] == want


def test_history_edges_are_the_cycle_s_multiples_from_min_history_below_l() -> None:
    edges = readout.calibration.history_edges
    assert edges(12, 12, 36) == [12, 13, 18, 24, 36]  # a cycle, its first pair, 1.5 and 2 cycles, full
    assert edges(12, 12, 72) == [12, 13, 18, 24, 36, 48, 72]
    assert edges(2, 1, 8) == [2, 3, 4, 6, 8]  # no cycle: the multiples of one value
    assert edges(8, 4, 24) == [8, 12, 16, 24]
    assert edges(24, 12, 24) == []  # every window the service forecasts is full: no block


def shop(rng: np.random.Generator, n: int) -> np.ndarray:
    """A monthly shop: a level, a cycle of its own size and phase, a trend, 8% noise."""
    t = np.arange(n)
    level, amp, trend = rng.uniform(50, 500), rng.uniform(0.0, 0.5), rng.normal(0, 0.01)
    cycle = amp * np.sin(2 * np.pi * t / 12 + rng.uniform(0, 2 * np.pi))
    return level * (1 + cycle + trend * t + 0.08 * rng.standard_normal(n))


def test_a_short_series_gets_widths_calibrated_on_windows_cut_as_short() -> None:
    """A series of one to two cycles, forecast by a read-out of L = 3 cycles, is forecast worse than the
    held-out windows (nearly all full) the main widths are calibrated on, and its spread is taken over
    few pairs: with the main widths alone its 80% interval covered 17-66% of new shops' next values
    (0.80 from full windows; scratch, 2026-12-07). The blocks of `intervals.history`, calibrated on the
    same windows cut as short, bring it near 80% and leave full windows as they were."""
    from export.global_models.onnx import calibrate_global, interval_halfwidths

    rng = np.random.default_rng(0)
    train = [shop(rng, int(rng.integers(40, 90))) for _ in range(150)]
    model = train_global(train, PanelConfig(horizon=6, period=12, input_periods=3, irls=0))
    assert (model.input_length, model.min_history) == (36, 12)
    intervals, _ = calibrate_global(model, train, [80.0, 95.0])
    assert intervals is not None and intervals["history"]["values"] == [12, 13, 18, 24, 36]
    blocks = np.asarray(intervals["history"]["widths"])  # [4, levels, H, 1]
    assert (np.diff(blocks, axis=0) <= 0).all()  # a block of fewer values is never the narrower
    main_only = {k: v for k, v in intervals.items() if k != "history"}
    for n, low in ((12, 0.75), (15, 0.75), (18, 0.75), (36, 0.75)):
        full = [shop(rng, n + 6) for _ in range(400)]
        history = [f[:n] for f in full]
        errors = np.abs(np.stack([f[n:] for f in full]) - model.forecast(history))
        covered = (errors <= interval_halfwidths(intervals, model, history)[0]).mean()
        plain = (errors <= interval_halfwidths(main_only, model, history)[0]).mean()
        assert covered >= low, (n, covered, plain)
        if n < 36:
            assert plain < 0.7, (n, covered, plain)
        else:
            assert covered == plain  # a full window: the main widths


@pytest.mark.parametrize(("short", "values"), [(0, [12, 13, 18, 24, 36]), (30, [12, 13, 18])])
def test_the_pooled_widths_serve_the_lengths_the_held_out_windows_have(short: int, values: list[int]) -> None:
    """Blocks end where a tenth of the held-out windows hold fewer values (POOLED_SHORT_SHARE): 100 shops
    of 60 months hold out windows of 54 values, `short` more of 24 months windows of 18, which the pooled
    widths then answer for (the long series cut short are not the short series: M3 yearly,
    docs/intervals.md)."""
    from export.global_models.onnx import calibrate_global

    rng = np.random.default_rng(1)
    train = [shop(rng, 60) for _ in range(100)] + [shop(rng, 24) for _ in range(short)]
    model = train_global(train, PanelConfig(horizon=6, period=12, input_periods=3, irls=0))
    intervals, said = calibrate_global(model, train, [80.0])
    assert intervals is not None and intervals["history"]["values"] == values, said
