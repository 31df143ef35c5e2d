"""The closed-form read-out: the network's own features, cheaply; its fits are fit_head's and
fit_linear_path's; rolling origins never fit on what they score."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from export.data import Split
from export.evaluate import evaluate
from export.linear_fit import fit_head, fit_linear_path
from export.readout import (
    Features,
    fit_readout,
    last_step_features,
    mse,
    origin_blocks,
    rolling_origins,
    split_features,
)
from models import ModelConfig, RSAForecaster

BANK = (
    ("regular", 1, 0.9, 0.0),
    ("cyclic_cos", 1, 0.95, 0.26),
    ("cyclic_sin", 1, 0.95, 0.26),
    ("regular", 6, 0.5, 0.0),
)


def _model(mu: float = 1.0, d_model: int = 4, positional: str = "none", seed: int = 0) -> RSAForecaster:
    torch.manual_seed(seed)
    cfg = ModelConfig(
        input_length=48,
        horizon=8,
        channels=2,
        d_model=d_model,
        n_heads=4,
        head="state",
        linear_residual=False,
        masked=True,
        gate="head",
        mu_init=mu,
        rem_heads=(0,) * 6,
        rem_bank=BANK if positional == "none" else (),
        positional=positional,
        dropout=0.0,
    )
    model = RSAForecaster(cfg).eval()
    with torch.no_grad():  # a non-trivial RevIN affine: the fits must account for it
        model.revin.weight.copy_(torch.tensor([1.3, 0.8]))
        model.revin.bias.copy_(torch.tensor([0.1, -0.2]))
    return model


def _split(name: str = "train", rows: int = 300, seed: int = 0) -> Split:
    rng = np.random.default_rng(seed)
    t = np.arange(rows)[:, None]
    data = np.sin(2 * np.pi * t / 24 + rng.uniform(0, 6, 2)) * rng.uniform(1, 3, 2)
    data = data + 0.3 * rng.standard_normal((rows, 2)).cumsum(0) / 10 + 0.3 * rng.standard_normal((rows, 2))
    return Split(name, data, np.arange(rows), input_length=48, horizon=8)


def _encoded(model: RSAForecaster, u: torch.Tensor) -> torch.Tensor:
    """The features RSAForecaster.encode gives the head for normalised inputs u [N, L] (one channel)."""
    cfg = dataclasses.replace(model.cfg, channels=1)
    one = RSAForecaster(cfg).eval()
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("revin")}
    one.load_state_dict(state, strict=False)
    one.revin = None  # u is already normalised
    with torch.no_grad():
        features, _, _, _ = one.encode(u[:, :, None])
    return features


@pytest.mark.parametrize("d_model, positional", [(4, "none"), (8, "none"), (4, "learned"), (8, "learned")])
def test_features_are_the_networks(d_model, positional):
    """Head widths 1 and 2, with and without a positional encoding (the baseline's)."""
    model = _model(d_model=d_model, positional=positional)
    u = torch.randn(16, 48)
    torch.testing.assert_close(
        last_step_features(model, u, "model"), _encoded(model, u), atol=2e-6, rtol=1e-5
    )


def test_each_mode_is_a_network_with_those_gates():
    """rem: a model whose gates are σ(30) = 1; softmax: gates σ(−30) ≈ 0; both: gates σ(3)."""
    u = torch.randn(16, 48)
    for mode, mu in (("rem", 30.0), ("softmax", -30.0), ("both", 3.0)):
        net = _model(mu=mu)
        got = last_step_features(_model(mu=0.5), u, mode)  # same weights (seed 0), other gates
        torch.testing.assert_close(got, _encoded(net, u), atol=2e-6, rtol=1e-5)
        assert not torch.allclose(got, last_step_features(_model(mu=0.5), u, "model"), atol=1e-3)


def test_fit_is_fit_head_and_its_mse_is_evaluate():
    model, train, val = _model(), _split(), _split("val", seed=1)
    feats = split_features(model, train, "model")
    sol, train_mse = fit_readout(feats, ridge=0.5)
    assert fit_head(model, train, ridge=0.5) == pytest.approx(train_mse, rel=1e-6)
    torch.testing.assert_close(sol[:-1].T.float(), model.head.weight, atol=1e-5, rtol=1e-5)
    assert mse(sol, split_features(model, val, "model")) == pytest.approx(
        evaluate(model, val)["mse"], rel=1e-4
    )


def test_window_mode_is_the_full_least_squares_map():
    cfg = ModelConfig(
        input_length=48, horizon=8, channels=2, d_model=1, n_heads=1, rem_heads=(0,) * 6, head="last"
    )
    ref = RSAForecaster(cfg).eval()
    torch.nn.init.zeros_(ref.head.weight)
    torch.nn.init.zeros_(ref.head.bias)
    train, val = _split(), _split("val", seed=1)
    sol, train_mse = fit_readout(split_features(ref, train, "window"), ridge=1.0)
    assert fit_linear_path(ref, train, ridge=1.0) == pytest.approx(train_mse, rel=1e-6)
    assert mse(sol, split_features(ref, val, "window")) == pytest.approx(evaluate(ref, val)["mse"], rel=1e-4)
    assert split_features(ref, val, "last").f.shape[1] == 1


def test_rolling_origins_never_fit_on_what_they_score():
    """Origin 0 is the train-only fit; origin k's fit uses no window whose targets reach block k, so
    spoiling the targets of the windows just before a block leaves that block's score alone."""
    model, train, val = _model(), _split(), _split("val", rows=260, seed=1)
    tr, va = split_features(model, train, "model"), split_features(model, val, "model")
    n, H = val.num_windows, val.horizon
    blocks = origin_blocks(n)
    assert blocks[0][0] == 0 and blocks[-1][1] == n and len(blocks) == 4
    scores = rolling_origins(tr, va, H, ridge=1.0)
    sol, _ = fit_readout(tr, ridge=1.0)
    assert scores[0] == pytest.approx(mse(sol, va, va.rows(*blocks[0])))
    first = blocks[2][0]
    t = va.t.clone()
    t[va.rows(first - H + 1, first)] += 100.0  # targets inside block 2's rows: never fit on for it
    spoiled = rolling_origins(tr, Features(va.f, t, va.w, va.channels), H, ridge=1.0)
    assert spoiled[2] == pytest.approx(scores[2])
    assert spoiled[3] != pytest.approx(scores[3])  # a later origin does fit on them
