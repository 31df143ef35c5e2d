"""A global model's settings and the validation split every global model shares (the REM read-out of
export/global_models/model.py and the RSA-Transformer of export/global_models/transformer.py): below both,
so neither imports the other's module (nor its command line) for them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from app.artifacts import readout
from export.bank import expand_bank
from export.covariates import CovariateSeries

__all__ = ["PanelConfig", "default_bank", "rem_kernels", "series_values", "validation_split"]


def default_bank(period: int) -> dict[str, Any]:
    """The REM bank of a global model of this period: 6 decays, every harmonic of the period at 3 decays
    (none for period < 2), 2 same-phase dilated decays (none for period < 2)."""
    spec: dict[str, Any] = {"regular": [0.3, 0.5, 0.7, 0.8, 0.9, 0.95]}
    if period >= 2:
        spec["cyclic"] = {"harmonics": list(range(1, period // 2 + 1)), "gamma": [0.8, 0.9, 0.97]}
        spec["dilated"] = {"lambda": [0.5, 0.9]}
    return spec


def rem_kernels(bank: Any, period: int, length: int) -> np.ndarray:
    """The last rows [K, L] of the bank's REMs over a window of `length` steps, as models/rem.py computes
    them, each row scaled to unit norm (app/artifacts/readout.py's `rem_kernels` of the expanded bank)."""
    return readout.rem_kernels(expand_bank(bank, period), length)


@dataclass(frozen=True)
class PanelConfig:
    """A global model's settings; `input_periods` None searches `INPUT_PERIODS` on validation."""

    horizon: int
    period: int  # the seasonal cycle in steps (12 for monthly data, 4 quarterly, 1 without a cycle)
    input_periods: int | None = None
    ridge: float = 1.0
    bank: dict[str, Any] | None = None  # None: default_bank(period)
    lags: int | None = None  # the last values fed as they are (None: one period, at least 2)
    # "series": every series weighs the same whatever its length; "window": every window weighs the same.
    weighting: str = "window"
    min_history: int | None = None  # None: one period, at least 2 (fewer values are not forecast)
    # The observed values a training window needs (None: two periods, at least min_history): windows of
    # mostly masked input taught the read-out worse (validation MASE on M3 quarterly 1.23 -> 1.18, M3
    # monthly 0.949 -> 0.938; Tourism quarterly 1.753 -> 1.756), while series from min_history on are
    # still forecast.
    train_history: int | None = None
    # How each window's squared errors are weighed: "level" as they are in units of the window's scale;
    # "mase" in units of the window's own seasonal-naive error (the MASE denominator, in-window), so the
    # fit weighs errors as MASE does (floored at `mase_floor` of the scale).
    row_scale: str = "mase"
    mase_floor: float = 0.2
    # Reweighted passes toward the absolute error (IRLS: each window weighed by 1 / its mean |residual|
    # of the pass before, floored at `irls_floor`): MASE and sMAPE are absolute, the ridge fit squared.
    irls: int = 3
    irls_floor: float = 0.05
    # A fixed random ReLU layer of this width over the features, read by the ridge beside them
    # (app/artifacts/readout/spec.py `Lift`): 0 none; None chosen on validation between 0 and LIFT_WIDTH
    # (export/global_models/search.py).
    lift: int | None = 0
    # A window below zero read as its mirror image above zero (app/artifacts/readout `FitSettings.mirror`):
    # None decided by `train_global` from the training series (on where none goes below zero: a model that
    # never saw a value below zero would otherwise read a series at -50 far outside what it was fitted on,
    # pretrained-quarterly forecasting 11, -36, -58 for one; measured 2026-12-05); False as before.
    mirror: bool | None = None

    def __post_init__(self) -> None:
        if self.horizon < 1 or self.period < 1:
            raise ValueError(f"horizon and period must be positive, got {self.horizon} and {self.period}")
        if self.row_scale not in ("level", "mase"):
            raise ValueError(f"row_scale must be 'level' or 'mase', got {self.row_scale!r}")
        if self.lift is not None and self.lift < 0:
            raise ValueError(f"lift must be 0 (none), a positive width or None (chosen), got {self.lift}")
        if self.weighting not in ("series", "window"):
            raise ValueError(f"weighting must be 'series' or 'window', got {self.weighting!r}")

    @property
    def n_lags(self) -> int:
        return self.lags if self.lags is not None else max(self.period, 2)

    @property
    def history(self) -> int:
        return self.min_history if self.min_history is not None else max(self.period, 2)

    @property
    def train_min(self) -> int:
        return self.train_history if self.train_history is not None else max(2 * self.period, self.history)

    def fitted_to(self, series: Sequence[Any], unvalidated: bool = False) -> PanelConfig:
        """These settings for training on `series`. Where `train_history` is not given and no series is
        long enough for a training window of `train_min` observed values before validation's first origin
        (each series' last H values held out, the window's H targets before them), a window needs fewer:
        as many as the longest series leaves there, longest − 2H, at least `history`. The default's two
        cycles (chosen on M3 and Tourism panels of many long series) had refused a lone monthly series of
        48 values at H 18, the length of 340 of M3 monthly's 1,428 series, with a message naming 24 + 18
        values it had. Shorter still, `unvalidated` (the read-out's training, which can fall back on fixed
        choices: `validates`) takes the one window the longest series holds, longest − H observed values
        and its H targets, where that is at least `history`. ValueError where even that is too many,
        naming what is needed."""
        longest = max((len(v) for v in series), default=0)
        room = longest - 2 * self.horizon
        if self.train_history is not None or room >= self.train_min:
            return self
        if room >= self.history:
            return replace(self, train_history=room)
        if unvalidated and longest - self.horizon >= self.history:
            return replace(self, train_history=longest - self.horizon)
        holds = 1 if unvalidated else 2
        most = (longest - self.history) // holds
        fix = f"a horizon of at most {most}, or longer series" if most >= 1 else "longer series"
        need = self.history + holds * self.horizon
        said = "" if unvalidated else "2 × "
        why = (
            "a training window needs its input and the horizon's values after it"
            if unvalidated
            else f"validation holds out each series' last {self.horizon} values, and a training window needs "
            f"{self.horizon} values after its input"
        )
        raise ValueError(
            f"the longest series has {longest} values: training needs at least min history + {said}horizon"
            f" = {self.history} + {said}{self.horizon} = {need} ({why}): give {fix}"
        )

    def validates(self, series: Sequence[Any]) -> bool:
        """Whether validation can be held out of `series`: the longest holds a training window of
        `train_min` values and its H targets before its last H values. Not where `fitted_to` took the one
        window a series too short to validate holds (`train_global` then makes fixed choices)."""
        return max((len(v) for v in series), default=0) >= self.train_min + 2 * self.horizon

    @property
    def spec(self) -> dict[str, Any]:
        return self.bank if self.bank is not None else default_bank(self.period)

    @property
    def fit_settings(self) -> readout.FitSettings:
        """The settings app/artifacts/readout.py fits with."""
        return readout.FitSettings(
            horizon=self.horizon,
            period=self.period,
            n_lags=self.n_lags,
            ridge=self.ridge,
            weighting=self.weighting,
            train_min=self.train_min,
            row_scale=self.row_scale,
            mase_floor=self.mase_floor,
            irls=self.irls,
            irls_floor=self.irls_floor,
            mirror=bool(self.mirror),
        )


def never_below_zero(series: Sequence[np.ndarray | CovariateSeries]) -> bool:
    """Whether no observed value of the series is below zero: `PanelConfig.mirror` where it is None."""
    return all(not (series_values(v) < 0).any() for v in series)


def series_values(v: np.ndarray | CovariateSeries) -> np.ndarray:
    return np.asarray(v.values if isinstance(v, CovariateSeries) else v, dtype=np.float64)


def validation_split(
    series: Sequence[np.ndarray | CovariateSeries], cfg: PanelConfig
) -> tuple[list[Any], list[int]]:
    """Training parts (the last H held out) of the series long enough to hold out and still forecast."""
    keep = [i for i, v in enumerate(series) if len(v) >= cfg.history + cfg.horizon]
    out: list[Any] = []
    for i in keep:
        v = series[i]
        out.append(
            v.head(len(v) - cfg.horizon)
            if isinstance(v, CovariateSeries)
            else series_values(v)[: -cfg.horizon]
        )
    return out, keep
