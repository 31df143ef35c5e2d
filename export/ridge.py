"""Weighted ridge regression by normal equations, accumulated batch by batch and solved in float64: the
one fit behind every closed-form read-out here (export/linear_fit.py: the model's own maps;
export/readout.py: refitted read-outs; export/global_models/model.py: the global model over many series,
through the numpy implementation it wraps).

`normalised_problem` states the problem a model's maps solve: targets, row weights and inputs in the
normalised coordinates the maps act in, so that the fit minimises the model's own loss (the MSE on the
scaled data).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from app.artifacts.readout import NormalEquations as _NumpyEquations
from export.data import Split
from models import RSAForecaster

__all__ = ["NormalEquations", "normalised_problem"]


class NormalEquations:
    """Weighted ridge regression t ≈ [f, 1]·W accumulated over batches, solved in float64: the torch face
    of `app.artifacts.readout.NormalEquations` (numpy), the one implementation, which the service's fit on
    request uses too."""

    def __init__(self, n_features: int, n_targets: int) -> None:
        self.equations = _NumpyEquations(n_features, n_targets)

    def add(self, f: Tensor, t: Tensor, w: Tensor) -> None:
        """f [n, F] features, t [n, T] targets, w [n, 1] row weights."""
        self.equations.add(_array(f), _array(t), _array(w))

    def solve(self, ridge: float) -> tuple[Tensor, float]:
        """(solution [F+1, T], the last row the bias; weighted mean squared residual)."""
        sol, mse = self.equations.solve(ridge)
        return torch.from_numpy(sol), mse


def _array(x: Tensor) -> np.ndarray:
    return x.detach().to("cpu", torch.float64).numpy()


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
