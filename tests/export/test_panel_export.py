"""export/global_onnx.py: a global model from a written long file to a published ONNX version whose
answers are GlobalModel.forecast's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.artifacts.contract import INSPECT_FILE, MODEL_FILE
from app.artifacts.repository import VersionRef, read_version
from export.global_onnx import GLOBAL_KIND, global_graph, run_graph, windows_of
from tests.utils.panel import HORIZON, NAME, PERIOD, publish, unseen


def test_a_published_global_model_forecasts_unseen_series_as_the_numpy_model(tmp_path: Path) -> None:
    repo, model = publish(tmp_path)
    folder = repo / NAME / "1"
    manifest = read_version(VersionRef(model=NAME, version=1, path=folder))  # sha256 checked
    assert manifest.kind == GLOBAL_KIND and manifest.channels == ("y",)
    assert manifest.panel is not None and manifest.panel.period == PERIOD
    assert manifest.min_history == model.min_history < manifest.input_length == model.input_length
    assert (manifest.horizon, manifest.frequency) == (HORIZON, "1MS")
    intervals = manifest.intervals  # pooled over the 12 stores: 50, 80 and 90 (95 needs 19 series)
    assert intervals is not None and intervals.levels == (50.0, 80.0, 90.0)
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


def test_export_refuses_an_existing_version(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from export.panel import cli

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
    from export.global_onnx import frequency_seconds

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


def test_the_calibration_report_gives_out_of_fold_coverage_per_history_group() -> None:
    """`intervals.calibration` is an IntervalCalibration: the levels dropped and why, and per history
    third the share of held-out values inside widths set by the other half of the series only."""
    from export.conformal import conformal_quantile
    from export.global_onnx import calibrate_global
    from export.panel import PanelConfig, train_global
    from export.reports import IntervalCalibration, from_dict

    rng = np.random.default_rng(3)
    t = np.arange(120)
    series = [
        (5 + i) * (1 + 0.3 * np.sin(2 * np.pi * t[: 40 + 3 * i] / 12) + 0.1 * rng.standard_normal(40 + 3 * i))
        for i in range(24)
    ]
    model = train_global(series, PanelConfig(horizon=6, period=12, input_periods=2, irls=0))
    intervals, said = calibrate_global(model, series)
    assert intervals is not None and intervals["levels"] == [50.0, 80.0, 90.0, 95.0]
    assert "[99.0] need more than the 24 series" in said
    report = from_dict(IntervalCalibration, intervals["calibration"])
    assert (
        report.series == 24 and report.dropped_levels == [99.0] and "[99.0]" in (report.dropped_because or "")
    )
    assert [g.group for g in report.coverage] == ["history 34-58", "history 61-82", "history 85-103", "all"]
    # Out of fold, by hand: halves of 12 series carry 50, 80 and 90 (95 needs ceil(13·0.95) = 13 > 12).
    assert list(report.coverage[-1].coverage) == ["50", "80", "90"]
    keep = [v for v in series if len(v) >= model.min_history + 6]
    fit, held = [v[:-6] for v in keep], np.array([v[-6:] for v in keep])
    ref = model.refit(fit)
    from export.global_onnx import series_spread

    scores = np.abs(held - ref.forecast(fit)) / series_spread(model, fit)[:, None]
    even, odd = scores[0::2], scores[1::2]
    inside = np.concatenate([even <= conformal_quantile(odd, 0.8), odd <= conformal_quantile(even, 0.8)])
    assert report.coverage[-1].coverage["80"] == pytest.approx(inside.mean())
