"""export/global_models/onnx.py: a global model from a written long file to a published ONNX version whose
answers are GlobalModel.forecast's."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from app.artifacts.contract import INSPECT_FILE, MODEL_FILE
from app.artifacts.repository import VersionRef, read_version
from export.global_models.onnx import GLOBAL_KIND, global_graph, run_graph, windows_of
from tests.utils.panel import HORIZON, NAME, PERIOD, publish, unseen


def test_a_published_global_model_forecasts_unseen_series_as_the_numpy_model(tmp_path: Path) -> None:
    repo, model = publish(tmp_path)
    folder = repo / NAME / "1"
    manifest = read_version(VersionRef(model=NAME, version=1, path=folder))  # sha256 checked
    assert manifest.kind == GLOBAL_KIND and manifest.channels == ("y",)
    assert manifest.panel is not None and manifest.panel.period == PERIOD
    assert manifest.min_history == model.min_history < manifest.input_length == model.input_length
    assert (manifest.horizon, manifest.frequency) == (HORIZON, "1MS")
    # Pooled over the 12 stores, 9 rolling windows each where they hold them (99% needs 99 windows: 87,
    # so 99% is extrapolated from 95%).
    intervals = manifest.intervals
    assert intervals is not None and intervals.levels == (50.0, 80.0, 90.0, 95.0, 99.0)
    assert intervals.window_scale is not None and intervals.window_scale.lag == PERIOD
    assert not (folder / INSPECT_FILE).exists()
    histories = [v for _, v in unseen().values()] + [np.full(model.min_history, 3.0)]
    assert len(histories[1]) < model.input_length  # a short history: its start is masked
    got = run_graph(folder / MODEL_FILE, histories, model.input_length)
    np.testing.assert_allclose(got, model.forecast(histories), rtol=1e-4, atol=1e-3)


def test_the_missing_start_is_nan_and_changes_nothing_it_masks(tmp_path: Path) -> None:
    repo, model = publish(tmp_path)
    path = repo / NAME / "1" / MODEL_FILE
    short = unseen()["store_opened"][1]
    w = windows_of([short], model.input_length)
    assert np.isnan(w[0, : model.input_length - len(short), 0]).all()
    a = run_graph(path, [short], model.input_length)
    # The same values with anything before them cut off: the window is the same, so is the forecast.
    b = run_graph(path, [short[-model.input_length :]], model.input_length)
    np.testing.assert_array_equal(a, b)
    assert global_graph(model).graph.input[0].name == "window"


def test_an_all_zero_history_forecasts_zeros_in_the_graph_and_in_numpy(tmp_path: Path) -> None:
    """A window without a value (all zeros, or values below TINY) forecasts zeros: its scale's fallback
    of 1 divides, never multiplies back (readout.output_scales; before, the read-out's bias was the
    forecast). A short all-zero history too, and a zero history beside a normal one changes nothing."""
    repo, model = publish(tmp_path)
    path = repo / NAME / "1" / MODEL_FILE
    normal = unseen()["store_opened"][1]
    tiny = 1e-35 * (1.0 + np.arange(model.min_history) % 3)  # changes, so not still (hold_still)
    histories = [np.zeros(model.input_length), tiny, normal]
    got = run_graph(path, histories, model.input_length)
    np.testing.assert_array_equal(got[:2], 0.0)
    np.testing.assert_array_equal(model.forecast(histories)[:2], 0.0)
    np.testing.assert_array_equal(got[2], run_graph(path, [normal], model.input_length)[0])
    assert np.abs(got[2]).min() > 0


@pytest.mark.parametrize("c", [1e-20, 1e-12, 1e-9, 1e12])
def test_a_series_in_tiny_or_huge_units_forecasts_as_in_its_own(tmp_path: Path, c: float) -> None:
    """c times a series forecasts c times its forecast, in the graph (float32) and in numpy, however
    small c: below an absolute 1e-8 the window read as zeros until 2026-12-06 (1e-12 times a seasonal
    series came back 12.8 of its units off from pretrained-monthly)."""
    repo, model = publish(tmp_path)
    path = repo / NAME / "1" / MODEL_FILE
    histories = [v for _, v in unseen().values()]
    want = run_graph(path, histories, model.input_length)
    got = run_graph(path, [c * h for h in histories], model.input_length) / c
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    np.testing.assert_allclose(
        model.forecast([c * h for h in histories]) / c, model.forecast(histories), rtol=1e-9
    )


def test_a_still_window_forecasts_its_last_cycle_in_the_graph_and_in_numpy(tmp_path: Path) -> None:
    """A window without change (every value the one a period before: a constant, a cycle repeated, a short
    flat history) forecasts its last cycle repeated in the graph and the numpy model (readout.hold_still;
    before, the ridge's near-copy: 3000 forecast 3008-3039 with intervals of no width); one value changed
    and it is the read-out's again."""
    repo, model = publish(tmp_path)
    path = repo / NAME / "1" / MODEL_FILE
    L, H = model.input_length, HORIZON
    cycle = 40.0 + 3.0 * np.arange(PERIOD)
    repeated = np.tile(cycle, L // PERIOD + 3)[: L + 5]
    moved = repeated.copy()
    moved[-3] += 1.0
    histories = [np.full(L + 4, 3000.0), repeated, np.full(model.min_history, 0.37), moved]
    want = np.stack([np.full(H, 3000.0), repeated[len(repeated) - PERIOD + np.arange(H) % PERIOD]])
    got, numpy_forecast = run_graph(path, histories, L), model.forecast(histories)
    np.testing.assert_allclose(got[:2], want, rtol=1e-6)
    np.testing.assert_allclose(got[2], 0.37, rtol=1e-6)
    np.testing.assert_allclose(numpy_forecast[:3], np.vstack([want, np.full((1, H), 0.37)]), rtol=1e-12)
    np.testing.assert_allclose(got, numpy_forecast, rtol=1e-4, atol=1e-3)
    assert np.abs(got[3] - want[1]).max() > 1e-3  # a window that changes is the read-out's


def test_a_series_below_zero_is_forecast_as_the_mirror_of_one_above(tmp_path: Path) -> None:
    """The stores never go below zero, so the model reads a window below zero mirrored (FitSettings.mirror,
    decided by train_global): the forecast of -x is minus the forecast of x, in the graph and in numpy,
    and a series that only crosses zero is read as it is where its last cycle's mean is above zero.
    Without it a read-out fitted on positive series read -50 far outside its fit (pretrained-quarterly:
    11, -36, -58 for a series at -50 +- 1)."""
    repo, model = publish(tmp_path)
    assert model.config.mirror is True and model.fit_settings.mirror is True
    manifest = read_version(VersionRef(model=NAME, version=1, path=repo / NAME / "1"))
    assert manifest.readout is not None and manifest.readout["mirror"] is True
    path = repo / NAME / "1" / MODEL_FILE
    L = model.input_length
    normal = unseen()["store_opened"][1]
    crossing = np.sin(np.arange(L + 6) / 3.0) + 0.3  # its last cycle's mean above zero: not mirrored
    histories = [normal, -normal, crossing, -crossing]
    got, numpy_forecast = run_graph(path, histories, L), model.forecast(histories)
    np.testing.assert_allclose(got, numpy_forecast, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(numpy_forecast[1], -numpy_forecast[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], -got[0], rtol=1e-6)
    plain = dataclasses.replace(model, config=dataclasses.replace(model.config, mirror=False))
    np.testing.assert_allclose(plain.forecast(histories)[[0, 2]], numpy_forecast[[0, 2]], rtol=1e-12)
    assert np.abs(plain.forecast([-normal])[0] + numpy_forecast[0]).max() > 1e-3  # the rule does work


def test_a_model_trained_on_values_below_zero_reads_them_as_they_are() -> None:
    from export.global_models.config import PanelConfig, never_below_zero
    from export.global_models.search import train_global

    rng = np.random.default_rng(3)
    series = [10.0 + np.sin(np.arange(60) * 2 * np.pi / PERIOD) + rng.normal(0, 0.3, 60) for _ in range(8)]
    assert never_below_zero(series)
    series[3] = series[3] - 20.0
    assert not never_below_zero(series)
    model = train_global(series, PanelConfig(horizon=HORIZON, period=PERIOD, input_periods=2))
    assert model.config.mirror is False and model.fit_settings.mirror is False
    given = train_global(series, PanelConfig(horizon=HORIZON, period=PERIOD, input_periods=2, mirror=True))
    assert given.config.mirror is True  # a setting given is kept


def test_export_refuses_an_existing_version(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from export.global_models.cli import cli

    repo, _ = publish(tmp_path)
    again = CliRunner().invoke(
        cli,
        [
            "export",
            "--model",
            str(tmp_path / "run/model.json"),
            "--name",
            NAME,
            "--repository",
            str(repo),
            "--version",
            "1",
        ],
    )
    assert again.exit_code != 0 and "exists" in again.output


@pytest.mark.parametrize("frequency", ["1MS", "3MS", "1h", "1D"])
def test_frequency_seconds(frequency: str) -> None:
    from export.global_models.onnx import frequency_seconds

    assert frequency_seconds(frequency) > 0


def test_the_interval_spread_leaves_the_missing_start_out() -> None:
    """A short history's spread (its seasonal-naive error) is that of its observed values only; lag 1
    where no pair a period apart is observed; the floor where there is no pair at all."""
    from app.artifacts.contract import window_scale

    v = np.array([1.0, 4.0, 2.0, 8.0, 5.0, 9.0])
    w = windows_of([v], 8)  # two NaN first
    assert float(window_scale(w, "mean_abs_diff", 8, 1.0, [1e-9], lag=4)[0, 0, 0]) == 4.5  # |5-1|, |9-4|
    assert float(window_scale(w, "mean_abs_diff", 8, 1.0, [1e-9], lag=7)[0, 0, 0]) == pytest.approx(
        np.abs(np.diff(v)).mean()
    )
    one = windows_of([np.array([3.0])], 8)
    assert float(window_scale(one, "mean_abs_diff", 8, 1.0, [0.5], lag=4)[0, 0, 0]) == 0.5
    full = np.arange(16.0).reshape(2, 8, 1) ** 2  # no NaN: as before, lag 1
    np.testing.assert_allclose(
        window_scale(full, "mean_abs_diff", 8, 1.0, [1e-9])[:, 0, 0], np.abs(np.diff(full[:, :, 0])).mean(1)
    )
    # a window of one period or less (a read-out of L = period) holds no pair a period apart: lag 1 too,
    # observed or not, never the floor (which made the widths absolute: the same for 1e-3 and 1e3)
    for lag in (8, 9):
        np.testing.assert_allclose(
            window_scale(full, "mean_abs_diff", 8, 1.0, [1e-30], lag)[:, 0, 0],
            np.abs(np.diff(full[:, :, 0])).mean(1),
        )
    assert float(window_scale(full, "mean_abs_diff", 8, 1.0, [1e-30], 7)[0, 0, 0]) == 49.0  # |49 - 0|


def test_the_calibration_report_gives_out_of_fold_coverage_per_history_group() -> None:
    """`intervals.calibration` is an IntervalCalibration: the levels calibrated, the windows, and per
    history third the share of held-out values inside widths set by the other half of the series only.
    24 series are fewer than 99% needs windows (99): each holds out its last H + 4 values, 5 windows."""
    from app.artifacts.readout import calibrate
    from export.conformal import conformal_quantile
    from export.global_models.config import PanelConfig
    from export.global_models.onnx import calibrate_global, calibration_tail, readout_spec
    from export.global_models.search import train_global
    from export.reports import IntervalCalibration, from_dict

    rng = np.random.default_rng(3)
    t = np.arange(120)
    series = [
        (5 + i) * (1 + 0.3 * np.sin(2 * np.pi * t[: 40 + 3 * i] / 12) + 0.1 * rng.standard_normal(40 + 3 * i))
        for i in range(24)
    ]
    model = train_global(series, PanelConfig(horizon=6, period=12, input_periods=2, irls=0))
    intervals, said = calibrate_global(model, series)
    assert intervals is not None and intervals["levels"] == [50.0, 80.0, 90.0, 95.0, 99.0]
    assert said == (
        "intervals at [50.0, 80.0, 90.0, 95.0, 99.0] from 120 rolling windows over the last 10 values "
        "(at most) of 24 series; a series of 12-23 values takes the widths of the same windows cut as short "
        "(3 blocks)"
    )
    report = from_dict(IntervalCalibration, intervals["calibration"])
    assert (report.series, report.windows, report.dropped_levels, report.dropped_because) == (
        24,
        120,
        [],
        None,
    )
    assert [(g.group, g.series) for g in report.coverage] == [
        ("history 34-58", 9),
        ("history 61-82", 8),
        ("history 85-103", 7),
        ("all", 24),
    ]
    # Out of fold, by hand: every other series' 60 windows carry 50, 80, 90 and 95 (99 needs 99).
    assert list(report.coverage[-1].coverage) == ["50", "80", "90", "95"]
    tail, k = calibration_tail([len(v) for v in series], 6, model.min_history, model.config.train_min, [99.0])
    assert k == 5 and tail(70) == 10
    cal = calibrate(series, readout_spec(model), [80.0], tail)
    assert cal.per_series == (5,) * 24
    scores = cal.scores.reshape(24, 5, 6)
    even, odd = scores[0::2].reshape(-1, 6), scores[1::2].reshape(-1, 6)
    inside = np.concatenate([even <= conformal_quantile(odd, 0.8), odd <= conformal_quantile(even, 0.8)])
    assert report.coverage[-1].coverage["80"] == pytest.approx(inside.mean())


def test_the_report_scores_a_fold_by_the_widths_it_would_serve() -> None:
    """One series, 24 windows: each half (12) calibrates 90% by its largest score alone, which the served
    rule holds at 80%'s width times Laplace's ratio (`floored_levels`). The report's out-of-fold coverage
    scores each half against those widths, not the bare largest score of the other half."""
    from app.artifacts.readout.calibration import tail_ratio
    from export.global_models.calibration import calibration_report

    early = np.r_[np.ones(11), 1.05][:, None]  # its 90%: 1.05 alone; served: 1.0 x 1.43
    late = np.r_[np.ones(11), 1.3][:, None]  # 1.3 lies above 1.05, below 1.43
    assert tail_ratio(90.0, 80.0) > 1.3
    report = calibration_report(np.r_[early, late], 1, [80.0, 90.0], [], None, [50], [24])
    coverage = report.coverage[-1].coverage
    assert coverage["80"] == pytest.approx(22 / 24)  # 1.05 and 1.3 above 80%'s 1.0
    assert coverage["90"] == 1.0  # 23 of 24 by the bare largest of the other half


def test_one_series_gets_80_90_and_95_percent_and_three_get_99() -> None:
    """Few series hold out more of their last values (rolling windows, as the fit on request): one series
    of 103 values (H 6) holds out its last 51, 46 windows; many series keep one window each."""
    from export.global_models.config import PanelConfig
    from export.global_models.onnx import calibrate_global, calibration_tail
    from export.global_models.search import train_global

    rng = np.random.default_rng(5)
    t = np.arange(103)
    series = [
        (5 + i) * (1 + 0.3 * np.sin(2 * np.pi * t / 12 + i) + 0.1 * rng.standard_normal(len(t)))
        for i in range(3)
    ]
    model = train_global(series[:1], PanelConfig(horizon=6, period=12, input_periods=2))
    intervals, said = calibrate_global(model, series[:1])
    assert intervals is not None and intervals["levels"] == [50.0, 80.0, 90.0, 95.0, 99.0], said
    assert intervals["calibration"]["windows"] == 46 and "[99.0] extrapolated from 95%" in said
    report = intervals["calibration"]
    assert report["levels"] == [50.0, 80.0, 90.0, 95.0] and report["extrapolated_levels"] == [99.0]
    assert report["floored_levels"] == []  # 46 windows: 95% is their 45th score, not their largest
    assert report["dropped_levels"] == [] and report["dropped_because"] is None
    # 46 windows reach 95% (19 needed), not 99% (99): its widths are 95%'s times a Laplace error's
    # ratio, ln(1 − 0.99) / ln(1 − 0.95) = 1.537 (a normal's would be 1.314)
    widths = np.asarray(intervals["widths"])[:, :, 0]
    ratio = math.log(0.01) / math.log(0.05)
    np.testing.assert_allclose(widths[4], widths[3] * ratio)
    model = train_global(series, PanelConfig(horizon=6, period=12, input_periods=2))
    intervals, said = calibrate_global(model, series)
    assert intervals is not None and intervals["levels"][-1] == 99.0, said
    tail, k = calibration_tail([103] * 99, 6, 12, 24, [50.0, 99.0])
    assert (k, tail(103)) == (1, 6)  # as many series as 99% needs windows: their last H values


def test_a_series_with_too_few_windows_for_80_percent_gets_no_level_above_its_median() -> None:
    """14 values, H 6: one calibration window calibrates 50%; 80-99% are not guessed from that median
    (`EXTRAPOLATED_FROM`), and the export's line says how many windows would give them."""
    from export.global_models.config import PanelConfig
    from export.global_models.onnx import calibrate_global
    from export.global_models.search import train_global

    rng = np.random.default_rng(2)
    series = [100 + np.cumsum(rng.normal(1, 2, 14))]
    model = train_global(series, PanelConfig(horizon=6, period=1))
    intervals, said = calibrate_global(model, series)
    assert intervals is not None and intervals["levels"] == [50.0], said
    assert intervals["calibration"]["windows"] == 1 and intervals["calibration"]["extrapolated_levels"] == []
    assert "[80.0, 90.0, 95.0, 99.0] need more than the 1 windows" in said
    assert "from 4, 80% is calibrated and the levels above it up to 99% extrapolated" in said
