"""A fitted global read-out (`GlobalModel`: weights, settings, covariates, the hybrid's local half, its
model.json) and its fit: the normal equations of every window of every series, accumulated series by
series (`accumulate`; the distributed fit of batch/fit.py adds up the same blocks), solved by `fit_global`.

The command line that trains, exports and forecasts with it is export/global_models/cli.py; this module
holds what the batch fit, the benchmarks and the exporter's other modules need without importing a command
line."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.artifacts import readout
from app.artifacts.covariates import CovariateLayout
from app.artifacts.hybrid import LocalSpec
from export.covariates import CovariateSeries, series_covariate_rows
from export.global_models.config import PanelConfig, rem_kernels, series_values
from export.global_models.hybrid import tail_windows

__all__ = ["SCHEMA_VERSION", "GlobalModel", "accumulate", "fit_global"]

SCHEMA_VERSION = 1  # of model.json
LIFT_SEED = 0  # the random layer's seed (`PanelConfig.lift`)


@dataclass
class GlobalModel:
    """A fitted global read-out: `weights` [F + 1, H] (the last row the bias) over `features`."""

    config: PanelConfig
    input_length: int
    weights: np.ndarray
    frequency: str | None = None
    search: dict[str, float] = field(default_factory=dict)  # validation MASE per input length searched
    fit_seconds: float = 0.0
    # Covariates (export/covariates.py): the layout of the raw `covariates` rows, with its training
    # statistics; the weights' covariate rows follow the target's features. None: the target alone.
    covariates: CovariateLayout | None = None
    # Per covariate: validation MASE and MSE with and without it (train_global; empty without covariates).
    covariate_report: list[dict[str, Any]] = field(default_factory=list)
    # The IANA zone the training file's local times were read in (`--timezone`; None: UTC or offsets):
    # the manifest's `timezone`, so the service reads a naive `start` there and answers in it.
    timezone: str | None = None
    # The hybrid's local half (export/global_models/hybrid.py; None: the read-out alone).
    local: LocalSpec | None = None
    # What it was trained on (`training_record`): the series, the last timestamp of all, and of each by id
    # (up to TRAINING_ENDS series); None: unknown (a model.json written before, or trained from arrays).
    training: dict[str, Any] | None = None
    # The random layer over the features the weights also read (`PanelConfig.lift`; None: none).
    lift: readout.Lift | None = None

    @property
    def fit_settings(self) -> readout.FitSettings:
        """The settings its read-out was fitted with, its lift included (what a refit keeps)."""
        return dataclasses.replace(self.config.fit_settings, lift=self.lift)

    @property
    def min_history(self) -> int:
        return self.config.history

    @property
    def window_length(self) -> int:
        """The values the served graph reads: the read-out's L, or the local models' window if longer."""
        return max(self.input_length, self.local.length if self.local is not None else 0)

    def refit(self, series: Sequence[np.ndarray]) -> GlobalModel:
        """A read-out of the same settings and input length fitted on other series (calibration)."""
        refit = fit_global(series, self.config, self.input_length, self.covariates, self.lift)
        refit.local = self.local
        return refit

    def kernels(self) -> np.ndarray:
        """The REM bank's last rows [K, L] over this model's input length."""
        return rem_kernels(self.config.spec, self.config.period, self.input_length)

    def features(self, windows: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(features [n, F], scales [n]) of raw windows [n, L] whose observed steps are `mask` [n, L]."""
        return readout.features(
            windows,
            mask,
            self.config.period,
            self.config.n_lags,
            self.kernels(),
            self.lift,
            bool(self.config.mirror),
        )

    def forecast(
        self, histories: Sequence[np.ndarray], batch: int = 4096, covariates: np.ndarray | None = None
    ) -> np.ndarray:
        """The next H values [S, H] of each history (raw values, oldest first; any length of at least
        `min_history`: shorter than L is masked at the start). A covariate model needs `covariates`, the
        raw rows [S, D] of its layout (`CovariateLayout.assemble`)."""
        if (self.covariates is None) != (covariates is None):
            raise ValueError("covariates are given to a model without them, or missing for one with them")
        short = [i for i, h in enumerate(histories) if len(h) < self.min_history]
        if short:
            raise ValueError(
                f"{len(short)} series have fewer than min_history = {self.min_history} values "
                f"(the first: series {short[0]} with {len(histories[short[0]])})"
            )
        out = readout.forecast(
            self.weights,
            histories,
            self.fit_settings,
            self.kernels(),
            batch,
            self.covariates,
            covariates,
        )
        if self.local is None:
            return out
        # The local models read the window as the service feeds it (float32), so both fit the same values.
        windows = tail_windows(histories, self.window_length).astype(np.float32)
        return self.local.combine(out, windows, self.input_length if self.covariates is None else None)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "rem-readout-global",
            "schema_version": SCHEMA_VERSION,
            "config": asdict(self.config),
            "input_length": self.input_length,
            "min_history": self.min_history,
            "frequency": self.frequency,
            "timezone": self.timezone,
            "search": self.search,
            "fit_seconds": round(self.fit_seconds, 3),
            "weights": self.weights.tolist(),
            "covariates": None if self.covariates is None else self.covariates.to_json(),
            "covariate_report": self.covariate_report,
            "local": None if self.local is None else self.local.to_json(),
            "training": self.training,
            "lift": None if self.lift is None else dataclasses.asdict(self.lift),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GlobalModel:
        if d.get("kind") != "rem-readout-global" or d.get("schema_version") != SCHEMA_VERSION:
            found = f"{d.get('kind')!r}, schema {d.get('schema_version')!r}"
            raise ValueError(f"not a global model of schema {SCHEMA_VERSION}: {found}")
        return cls(
            config=PanelConfig(**d["config"]),
            input_length=int(d["input_length"]),
            weights=np.asarray(d["weights"], dtype=np.float64),
            frequency=d.get("frequency"),
            timezone=d.get("timezone"),
            search=dict(d.get("search") or {}),
            fit_seconds=float(d.get("fit_seconds") or 0.0),
            covariates=None if d.get("covariates") is None else CovariateLayout.from_json(d["covariates"]),
            covariate_report=list(d.get("covariate_report") or []),
            local=None if d.get("local") is None else LocalSpec.from_json(d["local"]),
            training=d.get("training"),
            lift=None if d.get("lift") is None else readout.Lift.from_json(d["lift"]),
        )

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json()) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> GlobalModel:
        return cls.from_json(json.loads(Path(path).read_text()))


def accumulate(
    series: Iterable[np.ndarray | CovariateSeries],
    cfg: PanelConfig,
    length: int,
    kernels: np.ndarray,
    previous: np.ndarray | None = None,
    layout: CovariateLayout | None = None,
) -> readout.NormalEquations | None:
    """One pass's normal equations over every window of `series` (None when none has a window)."""
    assert kernels.shape[1] == length
    if cfg.lift != 0:
        raise ValueError("the distributed fit has no lift: give lift = 0")
    if layout is None:
        return readout.accumulate(_plain(series), cfg.fit_settings, kernels, previous, covariates=None)
    items = list(series)
    return readout.accumulate(
        [series_values(v) for v in items],
        cfg.fit_settings,
        kernels,
        previous,
        covariates=_covariate_rows(items, layout),
    )


def _plain(series: Iterable[Any]) -> Iterable[np.ndarray]:
    """The values of `series` for a fit without covariates: CovariateSeries (validation without any of
    a plan's covariates) read as their values; anything else as it is (a generator stays one)."""
    if isinstance(series, Sequence) and any(isinstance(v, CovariateSeries) for v in series):
        return [series_values(v) for v in series]
    return series


def _covariate_rows(series: Sequence[Any], layout: CovariateLayout) -> readout.CovariateRows:
    """The fit's covariate rows of `series` (CovariateSeries, each with its covariates)."""
    if not all(isinstance(v, CovariateSeries) for v in series):
        raise ValueError("a covariate model is fitted on CovariateSeries")
    return readout.CovariateRows(layout, lambda i, ends: series_covariate_rows(series[i], layout, ends))


def fit_global(
    series: Iterable[np.ndarray | CovariateSeries],
    cfg: PanelConfig,
    input_length: int,
    layout: CovariateLayout | None = None,
    lift: readout.Lift | None = None,
) -> GlobalModel:
    """The read-out fitted on every window of every series, read one at a time, once per pass: IRLS
    passes (`cfg.irls` > 0) read them again, so they need a sequence; one pass takes any iterable (a
    generator of series too many to hold). With `cfg.lift` > 0 the features also pass through a random
    layer (`lift`, or one standardised on these series' windows: they are read once more, as a list)."""
    start = time.perf_counter()
    kernels = rem_kernels(cfg.spec, cfg.period, input_length)
    if cfg.lift is None:
        raise ValueError("cfg.lift None is chosen by train_global's search: fit_global needs a width")
    fit = cfg.fit_settings
    if cfg.lift and lift is None:
        if layout is not None:
            raise ValueError("a lift reads the target's features alone: a covariate model has none")
        values = [series_values(v) for v in series]
        series, lift = values, readout.fit_lift(values, fit, kernels, cfg.lift, LIFT_SEED)
    fit = dataclasses.replace(fit, lift=lift if cfg.lift else None)
    if layout is None:
        sol = readout.fit_weights(_plain(series), fit, kernels)
    else:
        items = list(series)
        sol = readout.fit_weights(
            [series_values(v) for v in items],
            fit,
            kernels,
            covariates=_covariate_rows(items, layout),
        )
    return GlobalModel(
        cfg, input_length, sol, fit_seconds=time.perf_counter() - start, covariates=layout, lift=fit.lift
    )
