"""The RSA-Transformer as a global model: one network over windows from every series of a panel.

Windows, their normalisation and short histories are export/panel.py's, so the transformer and the
closed-form REM read-out see the same data: every window of L steps whose input holds at least
`PanelConfig.train_min` observed values, divided by its own scale (the mean |value| of its last cycle),
the start before a series' first value masked (zeros, never invented values). The network has one
channel and no parameter per series (no RevIN statistics, no learned cycle table: the window's scale is
the normalisation), so it forecasts any series of the frequency.

The loss is export/panel.py's objective made absolute: each window's mean |error| in units of its own
in-window seasonal-naive error (floored at `PanelConfig.mase_floor` of its scale), i.e. a per-window
MASE, which the read-out approaches by reweighting its squared loss (IRLS).

Training and selection use validation only: every series' last H values are held out (export/panel.py's
split), the network trains on the windows before them and is scored after each epoch by mean MASE on
the held-out values; training stops after `patience` epochs without improvement, or at the budget
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
without it, as export/panel.py's read-out report does; `calibrate_transformer` turns the early-stopped
network's held-out forecasts into split-conformal interval widths.

    model = train_panel_transformer(covariate_series, cfg, 28, plan=CovariatePlan.fit(...))
    forecast = model.forecast(histories, covariates=rows)   # rows [S, D]: series_covariate_rows
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from app.artifacts.conformal import level_fits
from app.artifacts.covariates import CovariateLayout
from app.artifacts.readout import (
    last_windows,
    naive_error,
    pooled_intervals,
    series_windows,
    service_spread,
    window_ends,
    window_scales,
)
from app.inference.metrics import mase, seasonal_naive_scale
from export.covariates import (
    CovariatePlan,
    CovariateSeries,
    ablation_rows,
    series_covariate_rows,
)
from export.panel_config import PanelConfig, series_values, validation_split
from export.ridge import NormalEquations
from export.train import TrainConfig, param_groups, warmup_cosine
from models import Covariates, ModelConfig, RSAForecaster

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

DEFAULT_LEVELS = (50.0, 80.0, 90.0, 95.0, 99.0)  # export/global_onnx.py's, the read-out's levels


@dataclass(frozen=True)
class Budget:
    """The training budget: the same for every variant compared. An epoch is `windows_per_epoch`
    windows drawn at random (all of them when there are fewer), so the cost of an epoch does not grow
    with the panel; `max_seconds` is a safety cap on one training's wall time (recorded when hit)."""

    epochs: int = 20
    windows_per_epoch: int = 4096
    batch_size: int = 128
    patience: int = 5
    # configs/etth1-rsa.yaml's rates: the attention learns slowly on top of the least-squares start, the
    # few REM scalars (η, ν, θ, μ) 10x faster.
    lr: float = 1e-4
    rem_lr_mult: float = 10.0
    weight_decay: float = 0.05
    max_seconds: float = 240.0
    seed: int = 0
    threads: int = 1
    refit: bool = True
    # "least_squares": the linear path L→H starts at its ridge solution on the training windows (weighted
    # as the loss weighs them, squared) and the attention head at zero, so the network starts as the
    # least-squares linear model and the attention learns what it misses (configs/etth1-rsa.yaml's
    # start). "random": PyTorch's initialisation.
    start: str = "least_squares"
    # With the least-squares start, keep the linear path frozen (as configs/etth1-rsa.yaml does): trained
    # on at lr 1e-3 it drifted from its solution and the validation MASE of M3 monthly's RSA-Transformer
    # rose for the 4 epochs of patience (0.961 at the start), so the start was kept (first full run).
    freeze_linear: bool = True
    ridge: float = 1.0

    def __post_init__(self) -> None:
        for name in ("windows_per_epoch", "batch_size", "patience", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.epochs < 0 or (self.epochs == 0 and self.start != "least_squares"):
            raise ValueError(
                f"epochs must be >= 1, or 0 with the least-squares start (the linear model alone), "
                f"got {self.epochs}"
            )
        if self.start not in ("least_squares", "random"):
            raise ValueError(f"start must be 'least_squares' or 'random', got {self.start!r}")
        if self.lr <= 0 or self.max_seconds <= 0:
            raise ValueError(f"lr and max_seconds must be > 0, got {self.lr} and {self.max_seconds}")


def transformer_config(
    cfg: PanelConfig,
    input_length: int,
    rem: bool = True,
    d_model: int = 32,
    layout: CovariateLayout | None = None,
    **overrides: Any,
) -> ModelConfig:
    """configs/etth1-rsa.yaml's network for one channel: one layer of 4 heads, 2 regular and 2 cyclic
    causal REM heads (the cyclic ones starting at the period's frequency 2π/period), a linear path L→H
    beside it; no RevIN and no cycle table (per-window scaling instead, shared by every series).
    `rem=False`: the same network without REM heads (`ModelConfig.baseline()`). With a covariate
    `layout` the network takes its past, future (calendar included) and static columns."""
    if layout is not None:
        overrides = {
            "past_covariates": len(layout.past),
            "future_covariates": len(layout.future_columns),
            "static_covariates": layout.static_width,
            **overrides,
        }
    mcfg = ModelConfig(
        input_length=input_length,
        horizon=cfg.horizon,
        channels=1,
        d_model=d_model,
        n_heads=4,
        n_layers=1,
        d_ff=2 * d_model,
        dropout=0.1,
        rem_heads=(2, 1, 1, 0, 0, 0),
        masked=True,
        theta_init=2 * math.pi / cfg.period if cfg.period > 1 else None,
        revin=False,
        cycle_period=0,
        **overrides,
    )
    return mcfg if rem else mcfg.baseline()


def covariate_parts(layout: CovariateLayout, z: torch.Tensor) -> Covariates:
    """Standardised covariate rows z [n, D] in the layout's order (app/artifacts/covariates.py: past
    step-major, future step-major, statics) -> the network's `Covariates`. Plain slicing and reshapes, so
    the exported graph does the same."""
    L, H = layout.input_length, layout.horizon
    P, F, S = len(layout.past), len(layout.future_columns), layout.static_width
    return Covariates(
        past=z[:, : L * P].reshape(-1, L, P) if P else None,
        future=z[:, L * P : L * P + H * F].reshape(-1, H, F) if F else None,
        static=z[:, L * P + H * F : L * P + H * F + S] if S else None,
    )


@dataclass
class Windows:
    """Normalised training windows: inputs u [n, L], targets [n, H] (both in units of the window's
    scale), each window's loss weight [n] (1 / its floored in-window seasonal-naive error) and, for a
    covariate model, each window's standardised covariate row z [n, D] (the layout's order)."""

    u: torch.Tensor
    target: torch.Tensor
    weight: torch.Tensor
    z: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.u)

    def covariates(self, layout: CovariateLayout | None, idx: torch.Tensor) -> Covariates | None:
        """The network's covariates of the windows at `idx` (None without a layout)."""
        if layout is None or self.z is None:
            return None
        return covariate_parts(layout, self.z[idx])


def _normalised(x: np.ndarray, m: np.ndarray, period: int) -> tuple[np.ndarray, np.ndarray]:
    """(u [n, L], scales [n]): export/panel.py's scale, the masked start read as 0."""
    s = window_scales(x, m, period)
    return np.where(m > 0, x / s[:, None], 0.0), s


def panel_windows(
    series: Sequence[np.ndarray] | Sequence[CovariateSeries],
    cfg: PanelConfig,
    length: int,
    layout: CovariateLayout | None = None,
) -> Windows:
    """Every training window of every series (app/artifacts/readout.py's `series_windows`), normalised;
    with a covariate `layout` each window's covariate row (export/covariates.py's
    `series_covariate_rows`, the read-out's rows) standardised by the layout's statistics."""
    if layout is not None and not all(isinstance(v, CovariateSeries) for v in series):
        raise ValueError("a covariate model is trained on CovariateSeries (each with its covariates)")
    us, ts, ws, zs = [], [], [], []
    for item in series:
        v = series_values(item)
        win = series_windows(v, length, cfg.horizon, cfg.train_min)
        if win is None:
            continue
        x, m, t = win
        u, s = _normalised(x, m, cfg.period)
        d = naive_error(x, m, cfg.period) / s
        us.append(u.astype(np.float32))
        ts.append((t / s[:, None]).astype(np.float32))
        ws.append((1.0 / np.maximum(d, cfg.mase_floor)).astype(np.float32))
        if layout is not None:
            assert isinstance(item, CovariateSeries)
            ends = window_ends(len(v), cfg.horizon, cfg.train_min)  # the windows series_windows drew
            zs.append(layout.standardise(series_covariate_rows(item, layout, ends)).astype(np.float32))
    if not us:
        raise ValueError(
            f"no series has a window: each needs at least train_history + horizon = "
            f"{cfg.train_min} + {cfg.horizon} values"
        )
    return Windows(
        torch.from_numpy(np.concatenate(us)),
        torch.from_numpy(np.concatenate(ts)),
        torch.from_numpy(np.concatenate(ws)),
        torch.from_numpy(np.concatenate(zs)) if layout is not None else None,
    )


def _forecast(
    net: RSAForecaster,
    histories: Sequence[np.ndarray],
    period: int,
    batch: int = 4096,
    layout: CovariateLayout | None = None,
    covariates: np.ndarray | None = None,
) -> np.ndarray:
    """[S, H] forecasts; a covariate model (`layout`) reads `covariates` [S, D], raw, in its layout."""
    L = net.cfg.input_length
    out = np.empty((len(histories), net.cfg.horizon))
    if (layout is None) != (covariates is None):
        raise ValueError("a covariate model needs its covariate rows, and only it takes them")
    if layout is not None and covariates is not None:
        shape = np.shape(covariates)
        if len(shape) != 2 or shape != (len(histories), layout.width):
            raise ValueError(
                f"covariates must be one raw row per series, [{len(histories)}, {layout.width}] "
                f"(the layout's width D), got {list(shape)}"
            )
    net.eval()
    with torch.no_grad():
        for a in range(0, len(histories), batch):
            x, m = last_windows(histories[a : a + batch], L)
            u, s = _normalised(x, m, period)
            cov = None
            if layout is not None and covariates is not None:
                z = layout.standardise(np.asarray(covariates[a : a + batch], dtype=np.float64))
                cov = covariate_parts(layout, torch.from_numpy(z.astype(np.float32)))
            y = net(torch.from_numpy(u.astype(np.float32)).unsqueeze(-1), covariates=cov)
            assert isinstance(y, torch.Tensor)
            out[a : a + len(x)] = y[..., 0].double().numpy() * s[:, None]
    return out


@dataclass
class PanelTransformer:
    """A trained global transformer and how it was chosen."""

    config: PanelConfig
    network: RSAForecaster
    rem: bool
    budget: Budget
    history: list[dict[str, float]] = field(default_factory=list)  # per epoch: loss, val MASE, seconds
    best_epoch: int = 0
    val_mase: float = math.inf
    windows: int = 0  # training windows available (the whole histories' when refitted)
    stopped: str = ""  # why training ended: patience, epochs or max_seconds
    fit_seconds: float = 0.0
    covariates: CovariateLayout | None = None  # what the network reads beside the window, and how
    # The early-stopped (pre-refit) network's forecasts [n, H] of the held-out last H values of the
    # training series at `holdout_series` (their lengths `holdout_lengths`): calibrate_transformer's
    # errors. None when not trained here.
    holdout: np.ndarray | None = None
    holdout_series: tuple[int, ...] = ()
    holdout_lengths: tuple[int, ...] = ()
    val_mse: float = math.inf  # mean scaled MSE of those forecasts (units of seasonal-naive error²)
    # Per covariate group: validation MASE and MSE with and without it (`covariate_report`).
    covariate_report: list[dict[str, Any]] = field(default_factory=list)
    # The training file's columns train left out (--drop), saved in model.json's training record as a
    # read-out's `training.drop` is, so that export --data reads the file as train did (issue 45, item 9).
    drop: tuple[str, ...] = ()

    @property
    def input_length(self) -> int:
        return self.network.cfg.input_length

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.network.parameters())

    def forecast(self, histories: Sequence[np.ndarray], covariates: np.ndarray | None = None) -> np.ndarray:
        """The next H values [S, H] of each history (at least `config.history` values; shorter than L
        masked at the start); a covariate model reads each series' raw covariate row [S, D] (the
        layout's order, as `GlobalModel.forecast`)."""
        short = [i for i, h in enumerate(histories) if len(h) < self.config.history]
        if short:
            raise ValueError(
                f"{len(short)} series have fewer than min_history = {self.config.history} values "
                f"(the first: series {short[0]} with {len(histories[short[0]])})"
            )
        return _forecast(
            self.network, histories, self.config.period, layout=self.covariates, covariates=covariates
        )

    def report(self) -> dict[str, Any]:
        return {
            "rem": self.rem,
            "model_config": self.network.cfg.to_dict(),
            "parameters": self.parameters,
            "input_length": self.input_length,
            "best_epoch": self.best_epoch,
            "val_mase": self.val_mase,
            "stopped": self.stopped,
            "windows": self.windows,
            "fit_seconds": self.fit_seconds,
            "epochs": self.history,
            "gates": _gates(self.network) if self.rem else None,
            "val_mse": self.val_mse,
            "covariates": None if self.covariates is None else self.covariates.to_json(),
            "covariate_report": self.covariate_report,
        }


def _gates(net: RSAForecaster) -> list[float]:
    """σ(μ) per layer (or head): the share of each REM head's output taken from its REM."""
    return [float(g) for attn in net.attentions() for g in attn.gates().detach().flatten()]


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
            return _forecast(net, fit_hist, cfg.period, layout=layout, covariates=rows)

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
    """Per covariate group (the calendar as one), as export/panel.py's `covariate_report` for the
    read-out: validation MASE and scaled MSE of the transformer trained (at `budget`, the same seed) with
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
    forecasts of each training series' held-out last H values (`model.holdout`), as export/global_onnx.py's
    `calibrate_global` calibrates the read-out: (the manifest's `intervals` or None, a sentence saying
    what was calibrated or why nothing was). `series` are the series it was trained on (values or
    CovariateSeries). Each absolute error is divided by the spread the service computes from the same
    window (`window_scale`, mean |x_t − x_{t−period}| of the last L values), and per horizon step the
    conformal quantile of the pooled scores is the width, in units of that spread. The network was
    chosen on these held-out values (its epoch count), so the widths are a little optimistic where
    early stopping picked a lucky epoch; the read-out's calibration refits instead."""
    from export.global_onnx import calibration_report
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
    n, ordered = len(scores), sorted(levels)
    ok = [lv for lv in ordered if level_fits(n, lv)]
    dropped = [lv for lv in ordered if lv not in ok]
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
    report = calibration_report(scores, n, ok, dropped, why, [len(v) - H for v in values], [1] * n)
    intervals = {**pooled_intervals(scores, ok, L, period), "calibration": to_dict(report)}
    said = f"intervals at {ok} from {n} series' last {H} values (the early-stopped network's forecasts)"
    return intervals, said + (f"; {why}" if why else "")
