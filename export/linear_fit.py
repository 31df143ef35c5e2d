"""Closed-form fit of the forecaster's residual linear path (L→H on the RevIN-normalised input).

On ETTh1 a linear map fit by least squares beats every network we trained on validation MSE
(docs/results.md), and SGD needs many epochs to get there while the attention branch overfits in
one or two at long horizons.  So the linear path can start at its exact optimum and stay frozen,
with the attention branch's head at zero: the network begins as the least-squares linear model and
training only adds what the attention stack finds on top of it.
"""

from __future__ import annotations

import torch

from export.data import Split
from models import RSAForecaster

__all__ = ["fit_linear_path"]


@torch.no_grad()
def fit_linear_path(model: RSAForecaster, split: Split, ridge: float = 1.0, batch: int = 2048) -> float:
    """Set ``model.linear`` to the ridge solution on every window of ``split``; returns its MSE there.

    The model's loss is on the scaled data, y = (W·u + b)·std + mean with u the normalised input,
    so each normalised residual is weighted by its window's variance std²: a weighted least-squares
    problem over all windows and channels, solved in float64 from the (L+1)×(L+1) normal equations.
    """
    if model.linear is None or model.revin is None:
        raise ValueError("fit_linear_path needs a model with revin and linear_residual enabled")
    L, H = model.cfg.input_length, model.cfg.horizon
    gram = torch.zeros(L + 1, L + 1, dtype=torch.float64)
    cross = torch.zeros(L + 1, H, dtype=torch.float64)
    y_sq = 0.0
    count = 0
    for idx in torch.arange(split.num_windows).split(batch):
        x, y = split.windows(idx)  # (n, L, C), (n, H, C)
        if model.cycle is not None:  # the linear path sees and forecasts what the cycle leaves
            phase = split.phases(idx, model.cfg.cycle_period)
            x = x - model.cycle_rows(phase, L)
            y = y - model.cycle_rows(phase, H, offset=L)
        xn, mean, std = model.revin.normalise(x)
        # The target in the same normalised coordinates as the linear path's output.
        yn = (y - mean) / std * model.revin.weight + model.revin.bias
        u = torch.cat([xn.transpose(1, 2).reshape(-1, L), torch.ones(xn.shape[0] * xn.shape[2], 1)], 1)
        t = yn.transpose(1, 2).reshape(-1, H).double()
        # (weight scale)²: the denormalisation multiplies by std / revin.weight.
        w = (std / model.revin.weight).square().transpose(1, 2).reshape(-1, 1).double()
        u = u.double()
        gram += (u * w).T @ u
        cross += (u * w).T @ t
        y_sq += float((t * t * w).sum())
        count += t.numel()
    reg = ridge * torch.eye(L + 1, dtype=torch.float64)
    reg[-1, -1] = 0.0  # no penalty on the bias
    sol = torch.linalg.solve(gram + reg, cross)  # (L+1, H)
    model.linear.weight.copy_(sol[:-1].T.float())
    model.linear.bias.copy_(sol[-1].float())
    # Weighted residual sum of squares: Σw·t² − 2·tr(solᵀ·cross) + tr(solᵀ·gram·sol).
    rss = y_sq - 2 * float((sol * cross).sum()) + float((sol * (gram @ sol)).sum())
    return rss / count
