"""The global RSA-Transformer as a model (export/global_models/transformer.py trains it): its training budget
(`Budget`), the network's settings for a panel (`transformer_config`), its windows (`panel_windows`:
every window of L steps over every series, divided by its own scale, the start before a series' first
value masked, a covariate model's rows beside them) and the trained model (`PanelTransformer`: forecast,
save and load). export/global_models/transformer_onnx.py exports it without importing the training.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from app.artifacts import readout
from app.artifacts.covariates import CovariateLayout
from export.covariates import CovariateSeries, series_covariate_rows
from export.global_models.config import PanelConfig, series_values
from models import Covariates, ModelConfig, RSAForecaster

__all__ = [
    "DEFAULT_LEVELS",
    "Budget",
    "PanelTransformer",
    "Windows",
    "covariate_parts",
    "panel_windows",
    "transformer_config",
]

DEFAULT_LEVELS = (50.0, 80.0, 90.0, 95.0, 99.0)  # export/global_models/onnx.py's, the read-out's levels


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


def _normalised(x: np.ndarray, m: np.ndarray, period: int, mirror: bool) -> tuple[np.ndarray, np.ndarray]:
    """(u [n, L], scales [n]): export/global_models/model.py's scale, the masked start read as 0; with
    `mirror` (PanelConfig.mirror) negative for a window below zero, read as its mirror image."""
    s = readout.window_scales(x, m, period, mirror)
    return np.where(m > 0, x / s[:, None], 0.0), s


def panel_windows(
    series: Sequence[np.ndarray] | Sequence[CovariateSeries],
    cfg: PanelConfig,
    length: int,
    layout: CovariateLayout | None = None,
) -> Windows:
    """Every training window of every series (at most MAX_FIT_WINDOWS of one, as the read-out's fit reads
    them: app/artifacts/readout's `fit_ends`), normalised; with a covariate `layout` each window's
    covariate row (export/covariates.py's `series_covariate_rows`, the read-out's rows) standardised by
    the layout's statistics."""
    if layout is not None and not all(isinstance(v, CovariateSeries) for v in series):
        raise ValueError("a covariate model is trained on CovariateSeries (each with its covariates)")
    us, ts, ws, zs = [], [], [], []
    for item in series:
        v = series_values(item)
        ends = readout.fit_ends(len(v), cfg.horizon, cfg.train_min)
        if not len(ends):
            continue
        x, m, t = readout.windows_at(v, length, cfg.horizon, ends)
        u, s = _normalised(x, m, cfg.period, bool(cfg.mirror))
        d = readout.naive_error(x, m, cfg.period) / s
        us.append(u.astype(np.float32))
        ts.append((t / s[:, None]).astype(np.float32))
        zero = readout.output_scales(x, m, cfg.period) == 0  # an all-zero window forecasts zeros
        ws.append(np.where(zero, 0.0, 1.0 / np.maximum(d, cfg.mase_floor)).astype(np.float32))
        if layout is not None:
            assert isinstance(item, CovariateSeries)
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
    mirror: bool = False,
) -> np.ndarray:
    """[S, H] forecasts; a covariate model (`layout`) reads `covariates` [S, D], raw, in its layout; with
    `mirror` a window below zero is read as its mirror image and its forecast mirrored back."""
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
            x, m = readout.last_windows(histories[a : a + batch], L)
            u, _ = _normalised(x, m, period, mirror)
            cov = None
            if layout is not None and covariates is not None:
                z = layout.standardise(np.asarray(covariates[a : a + batch], dtype=np.float64))
                cov = covariate_parts(layout, torch.from_numpy(z.astype(np.float32)))
            y = net(torch.from_numpy(u.astype(np.float32)).unsqueeze(-1), covariates=cov)
            assert isinstance(y, torch.Tensor)
            out[a : a + len(x)] = readout.raw_forecast(
                y[..., 0].double().numpy(), x, m, period, layout is not None, mirror
            )
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
    # How train read its file (export.data.ReadOptions.changed: the columns left out, the id, timestamp
    # and target columns, fill, date format...), saved in model.json's training record as a read-out's
    # `training.read` is, so that export --data reads the file as train did (issue 45, item 9).
    read: dict[str, Any] = field(default_factory=dict)

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
            self.network,
            histories,
            self.config.period,
            layout=self.covariates,
            covariates=covariates,
            mirror=bool(self.config.mirror),
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
