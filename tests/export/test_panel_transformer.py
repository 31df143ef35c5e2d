"""Tests for export/panel_transformer.py: the RSA-Transformer (and its no-REM ablation) as a global model
over export/panel.py's windows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from app.artifacts.readout import series_windows, window_scales
from export.panel import PanelConfig, mase
from export.panel_transformer import (
    Budget,
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
        torch.testing.assert_close(trained.network.linear.weight, start.network.linear.weight)


def test_budget_is_checked() -> None:
    with pytest.raises(ValueError, match="epochs"):
        Budget(epochs=0, start="random")  # nothing trained and nothing fitted
    with pytest.raises(ValueError, match="epochs"):
        Budget(epochs=-1)
    with pytest.raises(ValueError, match="start"):
        Budget(start="zeros")
