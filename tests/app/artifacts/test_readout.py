"""app/artifacts/readout.py (the global read-out's numpy home) and app/artifacts/initializers.py (a graph's
constants replaced without the onnx package): the manifest block round trip and its refusals, the feature
cache between IRLS passes changing no number, and the initializer rewrite read back by ONNX Runtime."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from app.artifacts import readout
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


# -- calibrate's drift (issue 43: the last origin's widths were too wide for the forecast served) ----------


def test_drift_factor_is_the_quantiles_ratio_over_the_steps_capped_at_one() -> None:
    """Scores 0.8 times the earlier origin's give 0.8 at every level; grown, the factor stays 1; steps
    whose quantile is 0 at either origin are left out, and none left gives 1."""
    rng = np.random.default_rng(0)
    earlier = rng.exponential(1.0, (200, 6))
    for level in (20.0, 80.0):
        assert readout.drift_factor(0.8 * earlier, earlier, level) == pytest.approx(0.8)
        assert readout.drift_factor(1.3 * earlier, earlier, level) == 1.0
    later = 0.5 * earlier
    later[:, 0] = 0.0  # a step scored 0 (a flat series' window): left out, not a factor of 0
    assert readout.drift_factor(later, earlier, 80.0) == pytest.approx(0.5)
    assert readout.drift_factor(np.zeros((200, 6)), earlier, 80.0) == 1.0


def test_pooled_intervals_multiply_each_level_by_its_factor_and_stay_non_decreasing() -> None:
    scores = np.random.default_rng(1).exponential(1.0, (100, 4))
    plain = np.asarray(readout.pooled_intervals(scores, [50.0, 80.0], 24, 12)["widths"])[:, :, 0]
    scaled = np.asarray(readout.pooled_intervals(scores, [50.0, 80.0], 24, 12, [0.9, 0.5])["widths"])[:, :, 0]
    np.testing.assert_allclose(scaled[0], 0.9 * plain[0])
    np.testing.assert_allclose(scaled[1], np.maximum(0.5 * plain[1], 0.9 * plain[0]))


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


def test_drift_narrows_the_widths_where_the_scores_fell_towards_the_last_origin() -> None:
    """Noise quieter in every series' last H values: the last origin's scores (its errors over a window's
    spread from the noisier past) are smaller than the origin H earlier, so each level's widths are the
    plain calibration's times a factor below 1; the scores themselves and the windows are unchanged, and
    the calibration block names the rule and the factors."""
    H = 6
    series = noise_change(60, 80, 80 - H, 0.10, 0.02)
    spec = readout_spec(train_global(series, dataclasses.replace(CFG, irls=0)))
    levels, tail = [50.0, 80.0], lambda n: H
    plain = readout.calibrate(series, spec, levels, tail)
    drift = readout.calibrate(series, spec, levels, tail, drift=True)
    np.testing.assert_array_equal(drift.scores, plain.scores)
    assert (drift.windows, drift.per_series) == (plain.windows, plain.per_series) == (60, (1,) * 60)
    assert plain.intervals is not None and drift.intervals is not None
    assert plain.intervals["calibration"]["rule"] == "split_conformal"
    said = drift.intervals["calibration"]
    assert said["rule"] == "split_conformal_drift"
    assert (said["drift"]["origin"], said["drift"]["series"], said["drift"]["windows"]) == (
        "6 values earlier",
        60,
        60,
    )
    factors = [said["drift"]["factors"][key] for key in ("50", "80")]
    assert all(f < 0.6 for f in factors)
    w_plain = np.asarray(plain.intervals["widths"])[:, :, 0]
    w_drift = np.asarray(drift.intervals["widths"])[:, :, 0]
    np.testing.assert_allclose(
        w_drift, np.maximum.accumulate(w_plain * np.array(factors)[:, None]), rtol=1e-5
    )


def test_drift_never_widens_and_says_why_when_the_earlier_origin_cannot_be_fitted() -> None:
    """Noise louder in the last H values: the factor would exceed 1 and is capped, so the widths are the
    plain calibration's. Series too short to fit a read-out before the earlier origin (train_history +
    H = 24 + 6 values before it): no factor, the plain widths, and the block says why."""
    H = 6
    series = noise_change(60, 80, 80 - H, 0.02, 0.10)
    spec = readout_spec(train_global(series, dataclasses.replace(CFG, irls=0)))
    levels, tail = [50.0, 80.0], lambda n: H
    plain = readout.calibrate(series, spec, levels, tail)
    drift = readout.calibrate(series, spec, levels, tail, drift=True)
    assert plain.intervals is not None and drift.intervals is not None
    assert drift.intervals["calibration"]["drift"]["factors"] == {"50": 1.0, "80": 1.0}
    assert drift.intervals["widths"] == plain.intervals["widths"]
    short = [v[:40] for v in series]  # 40 - 2·6 = 28 < 30 values before the earlier origin's tail
    plain = readout.calibrate(short, spec, levels, tail)
    drift = readout.calibrate(short, spec, levels, tail, drift=True)
    assert plain.intervals is not None and drift.intervals is not None
    said = drift.intervals["calibration"]
    assert said["rule"] == "split_conformal" and said["drift"]["factors"] is None
    assert said["drift"]["why"] == "no series leaves a training window before it"
    assert drift.intervals["widths"] == plain.intervals["widths"]


def test_the_exporter_calibrates_many_series_with_the_drift_and_its_report_reads_back() -> None:
    """calibrate_global: one window per series (as many series as the levels need) calibrates with the
    drift; the manifest's calibration report names the rule and reads back as an IntervalCalibration."""
    from export.global_models.onnx import calibrate_global
    from export.reports import IntervalCalibration, from_dict

    series = noise_change(120, 80, 74, 0.10, 0.02)
    model = train_global(series, dataclasses.replace(CFG, irls=0))
    intervals, _ = calibrate_global(model, series, [50.0, 80.0, 95.0])
    assert intervals is not None
    report = from_dict(IntervalCalibration, intervals["calibration"])
    assert report.rule == "split_conformal_drift" and report.drift is not None
    assert report.drift["series"] == 120 and all(f < 1 for f in report.drift["factors"].values())
