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
from torch import Tensor

from export.data import Split
from models import RSAForecaster

__all__ = ["fit_head", "fit_linear_path"]


class _NormalEquations:
    """Weighted ridge regression t ≈ [f, 1]·W accumulated over batches, solved in float64."""

    def __init__(self, n_features: int, n_targets: int) -> None:
        self.gram = torch.zeros(n_features + 1, n_features + 1, dtype=torch.float64)
        self.cross = torch.zeros(n_features + 1, n_targets, dtype=torch.float64)
        self.t_sq = 0.0
        self.count = 0

    def add(self, f: Tensor, t: Tensor, w: Tensor) -> None:
        """f [n, F] features, t [n, T] targets, w [n, 1] row weights."""
        u = torch.cat([f, torch.ones(f.shape[0], 1, dtype=f.dtype)], 1).double()
        t, w = t.double(), w.double()
        self.gram += (u * w).T @ u
        self.cross += (u * w).T @ t
        self.t_sq += float((t * t * w).sum())
        self.count += t.numel()

    def solve(self, ridge: float) -> tuple[Tensor, float]:
        """(solution [F+1, T], the last row the bias; weighted mean squared residual)."""
        reg = ridge * torch.eye(self.gram.shape[0], dtype=torch.float64)
        reg[-1, -1] = 0.0  # no penalty on the bias
        sol = torch.linalg.solve(self.gram + reg, self.cross)
        # Weighted residual sum of squares: Σw·t² − 2·tr(solᵀ·cross) + tr(solᵀ·gram·sol).
        rss = self.t_sq - 2 * float((sol * self.cross).sum()) + float((sol * (self.gram @ sol)).sum())
        return sol, rss / self.count


def _targets(
    model: RSAForecaster, split: Split, idx: Tensor
) -> tuple[Tensor, Tensor | None, Tensor, Tensor, Tensor]:
    """For the windows at idx: (x [n, L, C] as the model reads it, their cycle phases or None, the
    normalised target [n*C, H], its row weights [n*C, 1], the normalised input u [n*C, L]).

    The loss is on the scaled data, y = out·std/revin.weight + …, so each normalised residual weighs
    its window's variance: weighted least squares over all windows and channels."""
    assert model.revin is not None
    L, H = model.cfg.input_length, model.cfg.horizon
    x, y = split.windows(idx)  # (n, L, C), (n, H, C)
    phase = split.phases(idx, model.cfg.cycle_period) if model.cycle is not None else None
    xc = x
    if phase is not None:  # the maps see and forecast what the cycle leaves
        xc = x - model.cycle_rows(phase, L)
        y = y - model.cycle_rows(phase, H, offset=L)
    xn, mean, std = model.revin.normalise(xc)
    yn = (y - mean) / std * model.revin.weight + model.revin.bias
    t = yn.transpose(1, 2).reshape(-1, H)
    w = (std / model.revin.weight).square().transpose(1, 2).reshape(-1, 1)
    u = xn.transpose(1, 2).reshape(-1, L)
    return x, phase, t, w, u


@torch.no_grad()
def fit_linear_path(model: RSAForecaster, split: Split, ridge: float = 1.0, batch: int = 2048) -> float:
    """Set ``model.linear`` to the ridge solution on every window of ``split``; returns its MSE there."""
    if model.linear is None or model.revin is None:
        raise ValueError("fit_linear_path needs a model with revin and linear_residual enabled")
    L, H = model.cfg.input_length, model.cfg.horizon
    eq = _NormalEquations(L, H)
    for idx in torch.arange(split.num_windows).split(batch):
        _, _, t, w, u = _targets(model, split, idx)
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
    from export.readout import last_step_features  # the network's own features, in closed form

    was_training = model.training
    model.eval()
    eq = _NormalEquations(model.head.in_features, model.cfg.horizon)
    for idx in torch.arange(split.num_windows).split(batch):
        x, phase, t, w, u = _targets(model, split, idx)
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
