"""Tests for export/global_models/transformer.py: the RSA-Transformer (and its no-REM ablation) as a global
model over export/global_models/model.py's windows."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from app.artifacts.contract import window_scale
from app.artifacts.covariates import CovariateLayout
from app.artifacts.readout import SCALE_FLOOR, last_windows, series_windows, window_scales
from app.inference.metrics import mase
from export.covariates import CovariatePlan, CovariateSeries, covariate_lines, series_covariate_rows
from export.global_models.config import PanelConfig
from export.global_models.transformer import (
    Budget,
    calibrate_transformer,
    covariate_parts,
    covariate_report,
    least_squares_start,
    panel_windows,
    train_panel_transformer,
    transformer_config,
)
from models import RSAForecaster
from tests.export.test_panel import seasonal_panel

PERIOD, H, L = 12, 6, 24
CFG = PanelConfig(horizon=H, period=PERIOD)
TINY = Budget(epochs=3, windows_per_epoch=256, batch_size=64, patience=2)


def test_the_ablation_has_no_rem_heads_and_the_same_everything_else() -> None:
    rsa = transformer_config(CFG, L, rem=True, d_model=16)
    plain = transformer_config(CFG, L, rem=False, d_model=16)
    assert [k for k, _ in rsa.head_types] == ["regular", "regular", "cyclic_cos", "cyclic_sin"]
    assert [k for k, _ in plain.head_types] == ["softmax"] * 4
    assert plain.positional == "learned" and rsa.positional == "none"  # the paper's baseline
    assert rsa.theta_init == pytest.approx(2 * np.pi / PERIOD)  # cyclic heads start at the period
    assert (rsa.channels, rsa.revin, rsa.cycle_period) == (1, False, 0)  # nothing per series
    same = {"input_length", "horizon", "d_model", "n_heads", "n_layers", "d_ff", "dropout", "head"}
    assert all(getattr(rsa, f) == getattr(plain, f) for f in same)


def test_windows_are_the_read_outs_windows_scaled_by_their_last_cycle() -> None:
    series = seasonal_panel(5, seed=0)
    w = panel_windows(series, CFG, L)
    raw = [series_windows(v, L, H, CFG.train_min) for v in series]
    x = np.concatenate([r[0] for r in raw if r is not None])
    m = np.concatenate([r[1] for r in raw if r is not None])
    t = np.concatenate([r[2] for r in raw if r is not None])
    assert len(w) == len(x)
    s = window_scales(x, m, PERIOD)
    np.testing.assert_allclose(w.target.numpy() * s[:, None], t, rtol=1e-5)
    np.testing.assert_allclose(w.u.numpy()[m == 0], 0.0)  # the masked start reads 0, nothing invented
    np.testing.assert_allclose(w.u.numpy() * s[:, None] * m, x * m, rtol=1e-5)
    assert (w.weight > 0).all()
    with pytest.raises(ValueError, match="no series has a window"):
        panel_windows([np.ones(10)], CFG, L)


def test_least_squares_start_is_the_weighted_ridge_linear_model() -> None:
    series = seasonal_panel(8, seed=1)
    data = panel_windows(series, CFG, L)
    torch.manual_seed(0)
    net = RSAForecaster(transformer_config(CFG, L, d_model=8)).eval()
    least_squares_start(net, data, ridge=1.0)
    u, t, w = data.u.double(), data.target.double(), data.weight.double()[:, None] ** 2
    a = torch.cat([u, torch.ones(len(u), 1, dtype=u.dtype)], 1)
    penalty = torch.eye(L + 1, dtype=u.dtype)
    penalty[-1, -1] = 0.0  # the bias is not penalised
    sol = torch.linalg.solve((a * w).T @ a + penalty, (a * w).T @ t)  # squared errors weighed by w²
    with torch.no_grad():
        out = net(data.u.unsqueeze(-1))[..., 0].double()  # the attention head is zero: the linear path
    np.testing.assert_allclose(out.numpy(), (a @ sol).numpy(), atol=2e-3)


def test_trained_on_validation_refitted_and_forecasting_unseen_short_series() -> None:
    series = seasonal_panel(30, seed=2)
    model = train_panel_transformer(series[:20], CFG, L, rem=True, budget=TINY, d_model=8)
    assert model.history[0]["epoch"] == 0  # the start is a candidate
    assert model.val_mase == pytest.approx(min(h["val_mase"] for h in model.history))
    assert model.best_epoch in [h["epoch"] for h in model.history if h["val_mase"] == model.val_mase]
    assert model.stopped in ("patience", "epochs") and model.windows == len(
        panel_windows(series[:20], CFG, L)
    )
    unseen = [v[:-H] for v in series[20:]] + [series[20][: PERIOD + 3]]  # one shorter than L: masked start
    forecast = model.forecast(unseen)
    assert forecast.shape == (11, H) and np.isfinite(forecast).all()
    actual = np.array([v[-H:] for v in series[20:]])
    naive = np.array([np.resize(v[-PERIOD:], H) for v in unseen[:10]])
    # A clean seasonal panel: the global model forecasts series it never saw better than their own
    # seasonal naive does.
    assert (
        mase(unseen[:10], actual, forecast[:10], PERIOD).mean()
        < mase(unseen[:10], actual, naive, PERIOD).mean()
    )
    with pytest.raises(ValueError, match="min_history"):
        model.forecast([np.ones(PERIOD - 1)])
    report = model.report()
    assert report["rem"] and len(report["gates"]) == 4 and all(0 < g < 1 for g in report["gates"])


def test_same_seed_same_model_and_the_ablation_reports_no_gates() -> None:
    series = seasonal_panel(12, seed=3)
    budget = dataclasses.replace(TINY, refit=False)
    a = train_panel_transformer(series, CFG, L, rem=False, budget=budget, d_model=8)
    b = train_panel_transformer(series, CFG, L, rem=False, budget=budget, d_model=8)
    np.testing.assert_array_equal(a.forecast(series), b.forecast(series))
    assert [h["val_mase"] for h in a.history] == [h["val_mase"] for h in b.history]
    assert a.report()["gates"] is None and a.best_epoch == b.best_epoch


def test_no_epochs_is_the_least_squares_linear_model_and_a_frozen_path_stays_put() -> None:
    series = seasonal_panel(12, seed=4)
    start = train_panel_transformer(series, CFG, L, budget=dataclasses.replace(TINY, epochs=0), d_model=8)
    assert start.best_epoch == 0 and [h["epoch"] for h in start.history] == [0]
    assert not start.network.head.weight.any()  # the attention branch is off: the linear model
    trained = train_panel_transformer(series, CFG, L, budget=dataclasses.replace(TINY, patience=9), d_model=8)
    assert trained.best_epoch >= 1 or trained.val_mase == start.val_mase
    if trained.best_epoch >= 1:  # the refit trained the attention on top of the same frozen linear path
        assert trained.network.head.weight.any()
        assert trained.network.linear is not None and start.network.linear is not None
        torch.testing.assert_close(trained.network.linear.weight, start.network.linear.weight)


def test_budget_is_checked() -> None:
    with pytest.raises(ValueError, match="epochs"):
        Budget(epochs=0, start="random")  # nothing trained and nothing fitted
    with pytest.raises(ValueError, match="epochs"):
        Budget(epochs=-1)
    with pytest.raises(ValueError, match="start"):
        Budget(start="zeros")


# -- covariates (issue 36) ----------------------------------------------------------------------------

WEEK, PH, PL = 7, 7, 14
PROMO = 0.5  # the tiny panel's promotion effect: +50% sales


def promo_panel(n: int, days: int = 120, seed: int = 0) -> list[CovariateSeries]:
    """Daily shops: a level, a weekly cycle, 5% noise, promotions on a fifth of days raising sales by
    PROMO (bench/covariates.py's panel, smaller)."""
    rng = np.random.default_rng(seed)
    stamps = np.datetime64("2022-01-03", "ns") + np.arange(days) * np.timedelta64(1, "D")
    out = []
    for i in range(n):
        t = np.arange(days)
        promo = (rng.random(days) < 0.2).astype(float)
        weekly = 1 + 0.3 * np.sin(2 * np.pi * t / WEEK + rng.uniform(0, 2 * np.pi))
        y = rng.uniform(20, 2000) * weekly * (1 + PROMO * promo) * (1 + 0.05 * rng.standard_normal(days))
        out.append(CovariateSeries(f"shop_{i}", y, stamps, future={"promo": promo}))
    return out


PCFG = PanelConfig(horizon=PH, period=WEEK)


def _rows_with(panel: list[CovariateSeries], layout: CovariateLayout, promo: float) -> np.ndarray:
    """Each series' raw covariate row of the window after its history, the horizon's promo set."""
    rows = []
    for s in panel:
        f = {"promo": np.concatenate([s.future["promo"][:-PH], np.full(PH, promo)])}
        c = CovariateSeries(s.id, s.values, s.timestamps, future=f)
        rows.append(series_covariate_rows(c, layout, np.array([len(s) - PH])))
    return np.concatenate(rows)


def test_trained_with_a_promotion_the_forecast_moves_with_it_by_about_its_effect() -> None:
    panel = promo_panel(16, seed=5)
    plan = CovariatePlan.fit(panel, (), ("promo",), (), ())
    budget = Budget(epochs=2, windows_per_epoch=512, batch_size=64, patience=2)
    model = train_panel_transformer(panel, PCFG, PL, budget=budget, d_model=8, plan=plan, report=False)
    assert model.covariates is not None and model.covariates.future == ("promo",)
    assert model.covariates.effect == "relative"  # a scaled network reads covariates relative to level
    assert model.network.cfg.future_covariates == 1 and model.network.covariate_linear is not None
    hist = [s.values[:-PH] for s in panel]
    on = model.forecast(hist, covariates=_rows_with(panel, model.covariates, 1.0))
    off = model.forecast(hist, covariates=_rows_with(panel, model.covariates, 0.0))
    effect = float(np.mean(on / off) - 1)
    assert 0.6 * PROMO < effect < 1.4 * PROMO, effect
    plain = train_panel_transformer(panel, PCFG, PL, budget=budget, d_model=8)
    assert plain.covariates is None and model.val_mase < plain.val_mase  # the promotion helps
    assert model.report()["covariates"]["future"] == ["promo"]


def test_least_squares_start_with_covariates_is_one_ridge_over_window_and_covariates() -> None:
    panel = promo_panel(6, seed=6)
    plan = CovariatePlan.fit(panel, (), ("promo",), ("dayofweek",), ())
    layout = plan.layout(PL, PH)
    data = panel_windows(panel, PCFG, PL, layout)
    assert data.z is not None and data.z.shape == (len(data), layout.width)
    torch.manual_seed(0)
    net = RSAForecaster(transformer_config(PCFG, PL, d_model=8, layout=layout)).eval()
    least_squares_start(net, data, ridge=1.0)
    u, z, t = data.u.double(), data.z.double(), data.target.double()
    w = data.weight.double()[:, None] ** 2
    a = torch.cat([u, z, torch.ones(len(u), 1, dtype=u.dtype)], 1)
    penalty = torch.eye(a.shape[1], dtype=u.dtype)
    penalty[-1, -1] = 0.0
    sol = torch.linalg.solve((a * w).T @ a + penalty, (a * w).T @ t)
    with torch.no_grad():  # both heads at zero: the network is the linear model with covariates
        out = net(data.u.unsqueeze(-1), covariates=covariate_parts(layout, data.z))[..., 0].double()
    np.testing.assert_allclose(out.numpy(), (a @ sol).numpy(), atol=2e-3)
    with pytest.raises(ValueError, match="covariate values per window"):
        least_squares_start(net, panel_windows(panel, PCFG, PL), ridge=1.0)


def test_a_covariate_model_refuses_missing_or_misshapen_rows_and_plain_series() -> None:
    panel = promo_panel(8, seed=7)
    plan = CovariatePlan.fit(panel, (), ("promo",), (), ())
    budget = Budget(epochs=0, refit=False)
    model = train_panel_transformer(panel, PCFG, PL, budget=budget, d_model=8, plan=plan, report=False)
    assert model.covariates is not None
    hist = [s.values[:-PH] for s in panel]
    with pytest.raises(ValueError, match="needs its covariate rows"):
        model.forecast(hist)
    rows = _rows_with(panel, model.covariates, 1.0)
    with pytest.raises(ValueError, match="one raw row per series"):
        model.forecast(hist, covariates=rows[:-1])
    with pytest.raises(ValueError, match="CovariateSeries"):
        train_panel_transformer([s.values for s in panel], PCFG, PL, budget=budget, plan=plan)


def test_calibrated_widths_are_positive_ordered_by_level_and_need_the_training_series() -> None:
    panel = promo_panel(24, seed=8)
    plan = CovariatePlan.fit(panel, (), ("promo",), (), ())
    budget = Budget(epochs=1, windows_per_epoch=256, batch_size=64)
    model = train_panel_transformer(panel, PCFG, PL, budget=budget, d_model=8, plan=plan, report=False)
    assert model.holdout is not None and model.holdout.shape == (24, PH)
    intervals, said = calibrate_transformer(model, panel, (50.0, 80.0, 90.0, 99.0, 99.9))
    # 24 series calibrate up to 90%: 99% is extrapolated from it (the read-out's rule), 99.9% left out
    assert intervals is not None and intervals["levels"] == [50.0, 80.0, 90.0, 99.0]
    assert "[99.0] extrapolated from 90%" in said and "[99.9]" in said, said
    assert intervals["calibration"]["extrapolated_levels"] == [99.0]
    assert intervals["calibration"]["dropped_levels"] == [99.9]
    widths = np.asarray(intervals["widths"])[:, :, 0]  # [levels, H]
    ratio = math.log(0.01) / math.log(0.10)  # a Laplace error's |e| quantiles (a normal's: 1.566)
    np.testing.assert_allclose(widths[3], widths[2] * ratio)
    widths = widths[:3]
    assert widths.shape == (3, PH) and (widths > 0).all()
    assert (np.diff(widths, axis=0) >= 0).all() and (np.diff(widths, axis=0) > 0).any()
    assert intervals["window_scale"]["rows"] == PL and intervals["window_scale"]["lag"] == WEEK
    # Every held-out score at most the 90% width in 90% of cases or more: the widths are the scores'.
    hist = [s.values[:-PH] for s in panel]
    x, m = last_windows(hist, PL)
    window = np.where(m > 0, x, np.nan)[:, :, None]
    spread = window_scale(window, "mean_abs_diff", PL, 1.0, [SCALE_FLOOR], WEEK)[:, 0, 0]
    scores = np.abs(np.array([s.values[-PH:] for s in panel]) - model.holdout) / spread[:, None]
    assert ((scores <= widths[2]).mean(0) >= 0.9).all()
    with pytest.raises(ValueError, match="trained on"):
        calibrate_transformer(model, panel[:10])
    assert calibrate_transformer(model, panel, (99.0,))[0] is None  # nothing calibrated: nothing extrapolated


def test_the_covariate_report_says_a_useless_covariate_does_not_help() -> None:
    panel = promo_panel(12, seed=9)
    rng = np.random.default_rng(0)
    noisy = [dataclasses.replace(s, future={**s.future, "noise": rng.standard_normal(len(s))}) for s in panel]
    plan = CovariatePlan.fit(noisy, (), ("promo", "noise"), (), ())
    budget = Budget(epochs=1, windows_per_epoch=256, batch_size=64)
    rows = covariate_report(noisy, PCFG, PL, plan, budget=budget, d_model=8)
    by = {r["covariate"]: r for r in rows}
    assert set(by) == {"promo", "noise"}
    assert by["promo"]["helps"] and by["promo"]["mase_with"] < by["promo"]["mase_without"]
    assert by["promo"]["mase_with"] == by["noise"]["mase_with"]  # one model with both
    lines = covariate_lines(rows)
    assert len(lines) == 2 and all(line.startswith("covariate ") for line in lines)
    verdicts = {r["covariate"]: ("DOES NOT HELP" in line) for r, line in zip(rows, lines, strict=True)}
    assert verdicts == {r["covariate"]: not r["helps"] for r in rows}


def test_past_and_static_covariates_train_and_forecast_series_never_seen() -> None:
    panel = promo_panel(10, seed=10)
    rng = np.random.default_rng(1)
    kinds = ["a", "b"]
    full = [
        dataclasses.replace(
            s,
            past={"footfall": s.values * (1 + 0.1 * rng.standard_normal(len(s)))},
            static={"kind": kinds[i % 2]},
        )
        for i, s in enumerate(panel)
    ]
    plan = CovariatePlan.fit(full[:8], ("footfall",), ("promo",), ("dayofweek",), ("kind",))
    budget = Budget(epochs=1, windows_per_epoch=256, batch_size=64)
    model = train_panel_transformer(full[:8], PCFG, PL, budget=budget, d_model=8, plan=plan, report=False)
    layout = model.covariates
    assert layout is not None and layout.past == ("footfall",) and layout.static_width == 2
    cfg = model.network.cfg
    assert (cfg.past_covariates, cfg.future_covariates, cfg.static_covariates) == (1, 8, 2)
    unseen = full[8:]
    ends = np.array([len(unseen[0]) - PH])
    rows = np.concatenate([series_covariate_rows(s, layout, ends) for s in unseen])
    forecast = model.forecast([s.values[:-PH] for s in unseen], covariates=rows)
    assert forecast.shape == (2, PH) and np.isfinite(forecast).all()
