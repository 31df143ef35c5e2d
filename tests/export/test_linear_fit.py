"""The closed-form linear path: optimal for the model's own loss, and frozen when training uses it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors import safe_open

from export.checkpoint import load_checkpoint
from export.data import Split
from export.evaluate import evaluate, load_for_checkpoint
from export.linear_fit import fit_head, fit_linear_path
from export.train import TrainConfig, train
from models import ModelConfig, RSAForecaster
from tests.export.test_train import tiny_config
from tests.utils.data import ettd_slice


@pytest.fixture(scope="module")
def slice_csv(tmp_path_factory):
    return ettd_slice(tmp_path_factory.mktemp("data") / "etth1_slice.csv", rows=1200)


def _split(rows: int = 400, channels: int = 3, seed: int = 0) -> Split:
    rng = np.random.default_rng(seed)
    t = np.arange(rows)[:, None]
    data = np.sin(2 * np.pi * t / 24 + rng.uniform(0, 6, channels)) * rng.uniform(1, 3, channels)
    data = data + 0.3 * rng.standard_normal((rows, channels)) + rng.uniform(-2, 2, channels)
    return Split("train", data, np.arange(rows), input_length=24, horizon=12)


def _model(split: Split) -> RSAForecaster:
    torch.manual_seed(0)
    cfg = ModelConfig(
        input_length=24, horizon=12, channels=3, d_model=8, d_ff=16, n_heads=2, rem_heads=(1, 1, 0, 0, 0, 0)
    )
    m = RSAForecaster(cfg)
    with torch.no_grad():  # a non-trivial RevIN affine: the fit must account for it
        m.revin.weight.copy_(torch.tensor([1.5, 0.7, 1.0]))
        m.revin.bias.copy_(torch.tensor([0.2, -0.1, 0.0]))
    torch.nn.init.zeros_(m.head.weight)
    torch.nn.init.zeros_(m.head.bias)
    return m


def test_fit_is_a_minimum_of_the_training_mse():
    split = _split()
    model = _model(split)
    reported = fit_linear_path(model, split, ridge=0.0)
    assert reported == pytest.approx(evaluate(model, split)["mse"], rel=1e-4)
    # The gradient of the model's own loss w.r.t. the linear path vanishes at the solution.
    x, y = split.windows(torch.arange(split.num_windows))
    loss = torch.nn.functional.mse_loss(model(x), y)
    gw, gb = torch.autograd.grad(loss, [model.linear.weight, model.linear.bias])
    assert float(gw.abs().max()) < 1e-4 and float(gb.abs().max()) < 1e-4
    # and any other linear map does worse
    with torch.no_grad():
        model.linear.weight.add_(1e-2 * torch.randn_like(model.linear.weight))
    assert evaluate(model, split)["mse"] > reported


def test_ridge_shrinks_the_weights():
    split = _split()
    norms = []
    for ridge in (0.0, 1e3):
        model = _model(split)
        fit_linear_path(model, split, ridge=ridge)
        norms.append(float(model.linear.weight.detach().norm()))
    assert norms[1] < norms[0]


def test_needs_a_linear_path():
    split = _split()
    model = RSAForecaster(
        ModelConfig(
            input_length=24,
            horizon=12,
            channels=3,
            d_model=8,
            n_heads=2,
            rem_heads=(1, 1, 0, 0, 0, 0),
            linear_residual=False,
        )
    )
    with pytest.raises(ValueError, match="linear_residual"):
        fit_linear_path(model, split)
    with pytest.raises(ValueError, match="linear_path"):
        TrainConfig(linear_path="closed_form")
    with pytest.raises(ValueError, match="linear_residual"):
        TrainConfig(linear_path="least_squares", model={"linear_residual": False})


def test_training_keeps_the_fitted_linear_path_frozen(slice_csv, tmp_path):
    run = train(tiny_config(slice_csv, tmp_path, name="ls", linear_path="least_squares"))
    report = json.loads((run / "report.json").read_text())
    fit = report["linear_fit"]
    assert fit["ridge"] == 1.0 and min(fit["train_mse"], fit["val_mse"], fit["test_mse"]) > 0
    model, info = load_checkpoint(run / "checkpoint.safetensors")
    with safe_open(run / "checkpoint.safetensors", "pt") as f:
        trained_w, trained_head = f.get_tensor("linear.weight"), f.get_tensor("head.weight")
    assert float(trained_head.abs().max()) > 0  # the head started at zero and learned
    # The fit at step 0 (RevIN's affine at ones and zeros), redone: training never moved it.
    fresh = RSAForecaster(model.cfg)
    fit_linear_path(fresh, load_for_checkpoint(info).train, ridge=1.0)
    torch.testing.assert_close(trained_w, fresh.linear.weight, rtol=1e-4, atol=1e-5)


def _state_model(linear_residual: bool = False) -> RSAForecaster:
    torch.manual_seed(0)
    cfg = ModelConfig(
        input_length=24,
        horizon=12,
        channels=3,
        d_model=4,
        n_heads=4,
        rem_heads=(0, 0, 0, 0, 0, 0),
        rem_bank=(("regular", 1, 0.9, 0.0), ("regular", 1, -0.5, 0.0), ("cyclic_cos", 1, 0.95, 0.26)),
        masked=True,
        gate="head",
        mu_init=3.0,
        head="state",
        linear_residual=linear_residual,
        dropout=0.0,
    )
    return RSAForecaster(cfg)


@pytest.mark.parametrize("linear_residual", [False, True])
def test_fit_head_is_a_minimum_of_the_training_mse(linear_residual):
    split = _split()
    model = _state_model(linear_residual)
    reported = fit_head(model, split, ridge=0.0)
    assert reported == pytest.approx(evaluate(model, split)["mse"], rel=1e-4)
    x, y = split.windows(torch.arange(split.num_windows))
    loss = torch.nn.functional.mse_loss(model(x), y)
    gw, gb = torch.autograd.grad(loss, [model.head.weight, model.head.bias])
    assert float(gw.abs().max()) < 1e-4 and float(gb.abs().max()) < 1e-4
    assert model.training  # the fit leaves the mode as it found it


def test_readout_least_squares_starts_training_from_the_fit(slice_csv, tmp_path):
    cfg = tiny_config(
        slice_csv,
        tmp_path,
        name="state",
        readout="least_squares",
        select_step0=True,
        min_gain=0.5,  # no epoch can improve validation by half: step 0 is kept
        reference_least_squares=True,
    )
    cfg.model.update(
        rem_heads=[0, 0, 0, 0, 0, 0],
        rem_bank={"regular": [0.9, -0.5], "cyclic": {"harmonics": [1], "gamma": [0.95]}},
        cycle_period=24,
        d_model=4,
        n_heads=4,
        head="state",
        linear_residual=False,
        masked=True,
        gate="head",
        mu_init=3.0,
    )
    cfg.readout_ablation = True  # set after the model settings it needs
    report = json.loads((train(cfg) / "report.json").read_text())
    assert report["best_epoch"] == 0 and report["step0"]["val_mse"] == report["val"]["mse"]
    assert report["test"]["mse"] == pytest.approx(report["step0"]["test_mse"], rel=1e-5)
    assert report["readout_fit"]["train_mse"] > 0
    ref = report["least_squares_reference"]
    assert ref["ridge"] == 1.0 and 0 < ref["train_mse"] < ref["val_mse"] + ref["test_mse"]
    # Each half of the layer with its read-out refitted: the model at step 0 mixes both at σ(3), so
    # "both" is the model itself; the REM half alone is within a hair of it on this slice.
    ablation = report["readout_ablation"]
    assert ablation["both"]["test_mse"] == pytest.approx(report["step0"]["test_mse"], rel=1e-4)
    assert ablation["both"]["val_mse"] == pytest.approx(report["step0"]["val_mse"], rel=1e-4)
    assert len(ablation["rem"]["val_origins"]) == 4 and ablation["last"]["features"] == 1
    kinds = [h["kind"] for h in report["recurrence"][0]["heads"]]
    assert kinds == ["regular", "regular", "cyclic_cos", "cyclic_sin"]
