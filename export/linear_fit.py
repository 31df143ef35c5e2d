"""Closed-form fits of the forecaster's linear maps, in the normalised coordinates they act in.

- ``fit_linear_path``: the residual linear path L→H on the RevIN-normalised input.  On ETTh1 at
  L = 96 a linear map fit by least squares beats every network we trained on validation MSE
  (docs/results.md), so it can start at its exact optimum and stay frozen.
- ``fit_head``: the head on whatever features the network gives it (for the "state" head: the states
  of the REM heads' linear RNNs after the window, rsa.md §7, computed in closed form by
  export/readout.py), so training starts from the best read-out of those states instead of from noise.
"""

from __future__ import annotations

import torch

from export.data import Split
from export.readout import last_step_features
from export.ridge import NormalEquations, normalised_problem
from models import RSAForecaster

__all__ = ["fit_head", "fit_linear_path"]


@torch.no_grad()
def fit_linear_path(model: RSAForecaster, split: Split, ridge: float = 1.0, batch: int = 2048) -> float:
    """Set ``model.linear`` to the ridge solution on every window of ``split``; returns its MSE there."""
    if model.linear is None or model.revin is None:
        raise ValueError("fit_linear_path needs a model with revin and linear_residual enabled")
    L, H = model.cfg.input_length, model.cfg.horizon
    eq = NormalEquations(L, H)
    for idx in torch.arange(split.num_windows).split(batch):
        _, _, t, w, u = normalised_problem(model, split, idx)
        eq.add(u, t, w)
    sol, mse = eq.solve(ridge)
    model.linear.weight.copy_(sol[:-1].T.float())
    model.linear.bias.copy_(sol[-1].float())
    return mse


@torch.no_grad()
def fit_head(model: RSAForecaster, split: Split, ridge: float = 1.0, batch: int = 256) -> float:
    """Set ``model.head`` to the ridge solution on the features the network computes for every window
    of ``split`` (with the linear path, if any, as it is); returns the MSE there."""
    if model.revin is None:
        raise ValueError("fit_head needs a model with revin")
    was_training = model.training
    model.eval()
    eq = NormalEquations(model.head.in_features, model.cfg.horizon)
    for idx in torch.arange(split.num_windows).split(batch):
        x, phase, t, w, u = normalised_problem(model, split, idx)
        if model.cfg.head == "state" and model.linear is None:  # exact (tests/export/test_readout.py)
            features = last_step_features(model, u)
        else:
            features, _, _, _ = model.encode(x, phase)
        if model.linear is not None:
            t = t - model.linear(u)
        eq.add(features, t, w)
    sol, mse = eq.solve(ridge)
    model.head.weight.copy_(sol[:-1].T.float())
    model.head.bias.copy_(sol[-1].float())
    model.train(was_training)
    return mse
