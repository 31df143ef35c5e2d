"""The RSA-Transformer as a global model: one network over windows from every series of a panel (its
training, covariate report and calibration here; its budget, windows and model in
export/global_models/transformer_model.py).

Windows, their normalisation and short histories are export/global_models/model.py's, so the transformer and
the closed-form REM read-out see the same data: every window of L steps whose input holds at least
`PanelConfig.train_min` observed values, divided by its own scale (the mean |value| of its last cycle),
the start before a series' first value masked (zeros, never invented values). The network has one
channel and no parameter per series (no RevIN statistics, no learned cycle table: the window's scale is
the normalisation), so it forecasts any series of the frequency.

The loss is export/global_models/model.py's objective made absolute: each window's mean |error| in units of
its own in-window seasonal-naive error (floored at `PanelConfig.mase_floor` of its scale), i.e. a per-window
MASE, which the read-out approaches by reweighting its squared loss (IRLS).

Training and selection use validation only: every series' last H values are held out
(export/global_models/config.py's `validation_split`), the network trains on the windows before them and is
scored after each epoch by mean MASE on the held-out values; training stops after `patience` epochs without
improvement, or at the budget
(`epochs`, `max_seconds`). With `refit` a fresh network of the same seed then trains on the whole
histories for the chosen number of epochs on the same schedule (as the read-out is refitted on the
whole histories after its input-length search); without it the early-stopped network is kept.

    model = train_panel_transformer(series, PanelConfig(horizon=18, period=12), 72, rem=True)
    forecast = model.forecast(series)       # [S, H]

The variant without REM (`rem=False`) is models/config.py's `ModelConfig.baseline()`: the same network
with plain softmax heads and a learned positional encoding instead (the paper's ablation).

Covariates (issue 36; `plan`, series of export/covariates.py's `CovariateSeries`): each window carries its
raw covariate row, built by the read-out's own code (`series_covariate_rows`, the layout of
app/artifacts/covariates.py's `CovariateLayout` at the plan's training statistics), standardised. The
network reads past-only values as input channels, future-known values (calendar included) as H horizon
tokens and statics on every token (models/forecaster.py), and a linear map over the flattened row beside
its linear path. The least-squares start solves the linear path and that map jointly (one weighted ridge
over [window, covariates]), so the network starts as the read-out's linear model with covariates; every
covariate acts relative to the window's scale (the layout's effect "relative": the target is divided by
it, as the read-out's relative effect). `covariate_report` scores each covariate on validation with and
without it, as export/global_models/search.py's read-out report does; `calibrate_transformer` turns the
early-stopped network's held-out forecasts into split-conformal interval widths.

    model = train_panel_transformer(covariate_series, cfg, 28, plan=CovariatePlan.fit(...))
    forecast = model.forecast(histories, covariates=rows)   # rows [S, D]: series_covariate_rows
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from app.artifacts.covariates import CovariateLayout
from app.artifacts.readout import (
    last_windows,
    level_plan,
    pooled_intervals,
    service_spread,
)
from app.inference.metrics import mase, seasonal_naive_scale
from export.covariates import (
    CovariatePlan,
    CovariateSeries,
    ablation_rows,
    series_covariate_rows,
)
from export.global_models.config import PanelConfig, never_below_zero, series_values, validation_split
from export.global_models.transformer_model import (
    DEFAULT_LEVELS,
    Budget,
    PanelTransformer,
    Windows,
    _forecast,
    covariate_parts,
    panel_windows,
    transformer_config,
)
from export.ridge import NormalEquations
from export.train_config import TrainConfig, param_groups, warmup_cosine
from models import RSAForecaster

__all__ = [
    "DEFAULT_LEVELS",
    "Budget",
    "PanelTransformer",
    "calibrate_transformer",
    "covariate_parts",
    "covariate_report",
    "least_squares_start",
    "panel_windows",
    "train_panel_transformer",
    "transformer_config",
]


@torch.no_grad()
def least_squares_start(net: RSAForecaster, data: Windows, ridge: float, batch: int = 8192) -> None:
    """Set the linear path (and, with covariates, the linear map over them) to their joint weighted
    ridge solution on `data` (features [u, z]) and the attention's heads (the window's and the horizon
    tokens') to zero: the network starts as the linear model with covariates."""
    assert net.linear is not None  # transformer_config keeps the linear path
    L, D = net.cfg.input_length, net.cfg.covariate_width
    if (data.z is None) != (D == 0) or (data.z is not None and data.z.shape[1] != D):
        got = 0 if data.z is None else data.z.shape[1]
        raise ValueError(f"the network reads {D} covariate values per window, the windows carry {got}")
    eq = NormalEquations(L + D, net.cfg.horizon)
    for a in range(0, len(data), batch):
        w = data.weight[a : a + batch, None]
        f = data.u[a : a + batch]
        if data.z is not None:
            f = torch.cat([f, data.z[a : a + batch]], 1)
        eq.add(f, data.target[a : a + batch], w * w)
    sol, _ = eq.solve(ridge)
    net.linear.weight.copy_(sol[:L].T.float())
    net.linear.bias.copy_(sol[-1].float())
    if net.covariate_linear is not None:
        net.covariate_linear.weight.copy_(sol[L : L + D].T.float())
    net.head.weight.zero_()
    net.head.bias.zero_()
    if net.future_head is not None:
        net.future_head.weight.zero_()
        net.future_head.bias.zero_()


def _train(
    net: RSAForecaster,
    data: Windows,
    budget: Budget,
    epochs: int,
    validate: Any = None,
    layout: CovariateLayout | None = None,
) -> tuple[list[dict[str, float]], int, float, str, dict[str, torch.Tensor]]:
    """Train `net` for at most `epochs` epochs; with `validate` (net -> MASE) keep the best epoch's
    weights (epoch 0: the start, untrained) and stop after `patience` epochs without improvement. The
    learning-rate schedule always spans `budget.epochs`, so a refit for k epochs follows the selection
    run's first k epochs."""
    gen = torch.Generator().manual_seed(budget.seed)
    per_epoch = min(len(data), budget.windows_per_epoch)
    steps = math.ceil(per_epoch / budget.batch_size)
    frozen = budget.start == "least_squares" and budget.freeze_linear and net.linear is not None
    if frozen:  # the linear model with covariates stays the least-squares one
        assert net.linear is not None
        net.linear.requires_grad_(False)
        if net.covariate_linear is not None:
            net.covariate_linear.requires_grad_(False)
    # export/train.py's groups: decay on matrices only, the REM scalars and gates at rem_lr_mult × lr.
    groups = param_groups(
        net, TrainConfig(lr=budget.lr, weight_decay=budget.weight_decay, rem_lr_mult=budget.rem_lr_mult)
    )
    opt = torch.optim.AdamW(groups, lr=budget.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(budget.epochs * steps))
    history: list[dict[str, float]] = []
    best, best_epoch, bad, stopped = math.inf, 0, 0, "epochs"
    if validate is not None:  # step 0 (the start, untrained) is a candidate too
        best = float(validate(net))
        history.append({"epoch": 0, "val_mase": best})
    best_state = copy.deepcopy(net.state_dict())
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        net.train()
        order = torch.randperm(len(data), generator=gen)[:per_epoch]
        total = 0.0
        for idx in order.split(budget.batch_size):
            pred = net(data.u[idx].unsqueeze(-1), covariates=data.covariates(layout, idx))
            assert isinstance(pred, torch.Tensor)
            loss = ((pred[..., 0] - data.target[idx]).abs().mean(1) * data.weight[idx]).mean()
            if not math.isfinite(loss.item()):
                raise RuntimeError(f"epoch {epoch}: training loss is {loss.item()}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        row = {"epoch": epoch, "train_loss": total / per_epoch}
        if validate is not None:
            score = float(validate(net))
            row["val_mase"] = score
            if score < best:
                best, best_epoch, bad = score, epoch, 0
                best_state = copy.deepcopy(net.state_dict())
            else:
                bad += 1
        else:
            best_epoch, best_state = epoch, net.state_dict()
        row["seconds"] = time.perf_counter() - t0
        history.append(row)
        if validate is not None and bad >= budget.patience:
            stopped = "patience"
            break
        if time.perf_counter() - start > budget.max_seconds:
            stopped = "max_seconds"
            break
    return history, best_epoch, best, stopped, best_state


def _holdout_rows(series: Sequence[Any], keep: Sequence[int], layout: CovariateLayout | None) -> Any:
    """The raw covariate rows [len(keep), D] of each kept series' held-out window (None without)."""
    if layout is None:
        return None
    H = layout.horizon
    return np.concatenate(
        [series_covariate_rows(series[i], layout, np.array([len(series[i]) - H])) for i in keep]
    )


def train_panel_transformer(
    series: Sequence[np.ndarray] | Sequence[CovariateSeries],
    cfg: PanelConfig,
    input_length: int,
    rem: bool = True,
    budget: Budget | None = None,
    d_model: int = 32,
    plan: CovariatePlan | None = None,
    report: bool = True,
) -> PanelTransformer:
    """Train the global transformer (`rem=False`: without REM heads) at `input_length`, choosing its
    epoch count on validation only (each series' last H values), then refit it on the whole histories
    for that many epochs (`budget.refit`).

    With covariates (`plan`, series of `CovariateSeries`) the network reads the plan's layout at this
    input length (its training statistics standardise the rows; the effect is relative to each
    window's scale whatever `plan.effect` says: a scaled network reads nothing else), and with `report`
    each covariate group is scored on validation with and without it (`covariate_report`, at
    `report_budget(budget)`: 1 + groups further trainings)."""
    budget = budget or Budget()
    cfg = cfg.fitted_to(series)  # the read-out's rule for short series (PanelConfig.fitted_to)
    if cfg.mirror is None:  # as the read-out's search: series that never go below zero mirror one that does
        cfg = dataclasses.replace(cfg, mirror=never_below_zero(series))
    layout = None
    if plan is not None:
        if not all(isinstance(v, CovariateSeries) for v in series):
            raise ValueError("a covariate model is trained on CovariateSeries (each with its covariates)")
        plan = dataclasses.replace(plan, effect="relative")
        layout = plan.layout(input_length, cfg.horizon)
    elif any(isinstance(v, CovariateSeries) for v in series):
        series = [series_values(v) for v in series]  # no plan: the target alone
    threads = torch.get_num_threads()
    torch.set_num_threads(budget.threads)
    try:
        start = time.perf_counter()
        fit_part, keep = validation_split(series, cfg)
        held = np.array([series_values(series[i])[-cfg.horizon :] for i in keep])
        fit_hist = [series_values(v) for v in fit_part]
        rows = _holdout_rows(series, keep, layout)

        def forecast_held(net: RSAForecaster) -> np.ndarray:
            mirror = bool(cfg.mirror)
            return _forecast(net, fit_hist, cfg.period, layout=layout, covariates=rows, mirror=mirror)

        def validate(net: RSAForecaster) -> float:
            return float(mase(fit_hist, held, forecast_held(net), cfg.period).mean())

        mcfg = transformer_config(cfg, input_length, rem, d_model, layout=layout)
        torch.manual_seed(budget.seed)
        net = RSAForecaster(mcfg)
        part = panel_windows(fit_part, cfg, input_length, layout)
        windows = len(part)
        if budget.start == "least_squares":
            least_squares_start(net, part, budget.ridge)
        history, best_epoch, val, stopped, state = _train(net, part, budget, budget.epochs, validate, layout)
        net.load_state_dict(state)
        del part
        holdout = forecast_held(net)  # the early-stopped network's: the intervals' errors
        naive = np.array([seasonal_naive_scale(v, cfg.period) for v in fit_hist])
        val_mse = float(np.mean(((held - holdout) ** 2).mean(1) / naive**2))
        if budget.refit:
            whole = panel_windows(series, cfg, input_length, layout)
            torch.manual_seed(budget.seed)
            net = RSAForecaster(mcfg)
            if budget.start == "least_squares":
                least_squares_start(net, whole, budget.ridge)
            done, _, _, refit_stop, state = _train(net, whole, budget, best_epoch, layout=layout)
            net.load_state_dict(state)
            if refit_stop == "max_seconds" and len(done) < best_epoch:  # said, never hidden
                stopped += f"; refit cut at max_seconds after {len(done)} of {best_epoch} epochs"
            windows = len(whole)
        net.eval()
        model = PanelTransformer(
            config=cfg,
            network=net,
            rem=rem,
            budget=budget,
            history=history,
            best_epoch=best_epoch,
            val_mase=val,
            windows=windows,
            stopped=stopped,
            covariates=layout,
            holdout=holdout,
            holdout_series=tuple(keep),
            holdout_lengths=tuple(len(series[i]) for i in keep),
            val_mse=val_mse,
        )
    finally:
        torch.set_num_threads(threads)
    if plan is not None and report:
        covs = [v for v in series if isinstance(v, CovariateSeries)]
        model.covariate_report = covariate_report(
            covs, cfg, input_length, plan, rem, report_budget(budget), d_model
        )
    model.fit_seconds = time.perf_counter() - start
    return model


def report_budget(budget: Budget) -> Budget:
    """The per-covariate report's budget: at most REPORT_EPOCHS epochs and a quarter of the time cap,
    no refit (only validation is scored), so a report costs 1 + groups short trainings."""
    return dataclasses.replace(
        budget,
        epochs=min(budget.epochs, REPORT_EPOCHS),
        max_seconds=budget.max_seconds / 4,
        refit=False,
    )


# The per-covariate report's epochs (report_budget).
REPORT_EPOCHS = 5


def covariate_report(
    series: Sequence[CovariateSeries],
    cfg: PanelConfig,
    input_length: int,
    plan: CovariatePlan,
    rem: bool = True,
    budget: Budget | None = None,
    d_model: int = 32,
) -> list[dict[str, Any]]:
    """Per covariate group (the calendar as one), as export/global_models/search.py's `covariate_report` for
    the read-out: validation MASE and scaled MSE of the transformer trained (at `budget`, the same seed) with
    every covariate and without that one, and whether it helped (lower MASE with it). A covariate that
    does not help is reported as such; it is kept (retrain without it to drop it)."""
    budget = dataclasses.replace(budget or report_budget(Budget()), refit=False)

    def scored(p: CovariatePlan | None) -> tuple[float, float]:
        m = train_panel_transformer(series, cfg, input_length, rem, budget, d_model, p, report=False)
        return m.val_mase, m.val_mse

    return ablation_rows(plan, scored)


def calibrate_transformer(
    model: PanelTransformer, series: Sequence[Any], levels: Sequence[float] = DEFAULT_LEVELS
) -> tuple[dict[str, Any] | None, str]:
    """Split-conformal intervals pooled across series from the early-stopped (pre-refit) network's
    forecasts of each training series' held-out last H values (`model.holdout`), as
    export/global_models/onnx.py's `calibrate_global` calibrates the read-out: (the manifest's `intervals` or
    None, a sentence saying what was calibrated or why nothing was). `series` are the series it was trained on
    (values or CovariateSeries). Each absolute error is divided by the spread the service computes from the
    same window (`window_scale`, mean |x_t − x_{t−period}| of the last L values), and per horizon step the
    conformal quantile of the pooled scores is the width, in units of that spread. The network was
    chosen on these held-out values (its epoch count), so the widths are a little optimistic where
    early stopping picked a lucky epoch; the read-out's calibration refits instead."""
    from export.global_models.calibration import calibration_report, extrapolated_note
    from export.reports import to_dict

    H, L, period = model.config.horizon, model.input_length, model.config.period
    if model.holdout is None:
        return None, "no interval: the model carries no held-out forecasts (train it here)"
    index = model.holdout_series
    lengths = [len(series[i]) if i < len(series) else -1 for i in index]
    if lengths != list(model.holdout_lengths):
        raise ValueError(
            "calibrate on the series the model was trained on: their number or lengths differ "
            f"({len(series)} series given)"
        )
    values = [series_values(series[i]) for i in index]
    actual = np.array([v[-H:] for v in values]).reshape(-1, H)
    x, m = last_windows([v[:-H] for v in values], L)
    scores = np.abs(actual - model.holdout) / service_spread(x, m, period)[:, None]
    n = len(scores)
    ok, extrapolated, dropped = level_plan(n, levels)
    if not ok:
        return (
            None,
            f"no interval: {n} series hold {H} values out after min_history = {model.config.history}, "
            f"too few for any of {list(levels)} (a level needs ceil((n + 1)·level) <= n series)",
        )
    why = (
        f"{dropped} need more than the {n} series that hold {H} values out after min_history = "
        f"{model.config.history} (a level needs ceil((n + 1)·level) <= n)"
        if dropped
        else None
    )
    before = [len(v) - H for v in values]
    report = calibration_report(scores, n, ok, dropped, why, before, [1] * n, extrapolated=extrapolated)
    given = ok + extrapolated  # ascending, as level_plan gives
    intervals = {**pooled_intervals(scores, given, L, period), "calibration": to_dict(report)}
    said = f"intervals at {given} from {n} series' last {H} values (the early-stopped network's forecasts)"
    return intervals, said + extrapolated_note(extrapolated, ok) + (f"; {why}" if why else "")
