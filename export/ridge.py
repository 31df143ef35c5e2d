"""Weighted ridge regression by normal equations, accumulated batch by batch and solved in float64: the
one fit behind every closed-form read-out here (export/linear_fit.py: the model's own maps;
export/readout.py: refitted read-outs; export/panel.py: the global model over many series).

`normalised_problem` states the problem a model's maps solve: targets, row weights and inputs in the
normalised coordinates the maps act in, so that the fit minimises the model's own loss (the MSE on the
scaled data).
"""

from __future__ import annotations

import torch
from torch import Tensor

from export.data import Split
from models import RSAForecaster

__all__ = ["NormalEquations", "normalised_problem"]


class NormalEquations:
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


def normalised_problem(
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
