"""One global model over many series: the closed-form REM read-out over windows from every series.

Each window of L = k·period steps is divided by its own scale (the mean |value| of its last cycle), so
no parameter belongs to a series: the model forecasts series it never saw, of the same frequency. Its
features are the last rows of a fixed bank of REMs (export/bank.py's spec; the kernels of models/rem.py:
regular decays, damped cyclic harmonics of the period, same-phase dilated decays) applied to the
normalised window, the window's last `lags` values, and the share of the window that is missing. One
ridge regression (app/artifacts/readout.py, numpy: the service refits with it) maps them to the H
normalised future values; its normal equations are accumulated series by series, so memory does not
grow with the number of series.

Short histories: a window reaching back before a series' first value has that start masked (zeros that
the features see as missing, with the missing share as a feature), not filled with invented values.
Every series of at least `min_history` values is forecast; the model states that minimum.

The input length is searched in periods of the cycle (`INPUT_PERIODS`) on validation only: the last H
values of every training series are held out, the read-out fitted on the rest and scored by MASE there.

    python -m export.panel train --data stores_long.csv --horizon 12 --out runs/stores
    python -m export.panel forecast --model runs/stores/model.json --data new_stores.csv
    python -m export.panel export --model runs/stores/model.json --name stores --repository model_repository

`export` publishes the model as an ONNX graph the service serves (export/global_onnx.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from app.artifacts import readout
from app.artifacts.readout import TINY as _TINY
from export.bank import expand_bank

__all__ = [
    "INPUT_PERIODS",
    "SCHEMA_VERSION",
    "GlobalModel",
    "PanelConfig",
    "default_bank",
    "fit_global",
    "mase",
    "rem_kernels",
    "smape",
    "train_global",
]

SCHEMA_VERSION = 1  # of model.json
# Input lengths searched, in periods of the cycle (a monthly model: 12, 24, 36, 48, 72 steps).
INPUT_PERIODS = (1, 2, 3, 4, 6)


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

    def __post_init__(self) -> None:
        if self.horizon < 1 or self.period < 1:
            raise ValueError(f"horizon and period must be positive, got {self.horizon} and {self.period}")
        if self.row_scale not in ("level", "mase"):
            raise ValueError(f"row_scale must be 'level' or 'mase', got {self.row_scale!r}")
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
        )


@dataclass
class GlobalModel:
    """A fitted global read-out: `weights` [F + 1, H] (the last row the bias) over `features`."""

    config: PanelConfig
    input_length: int
    weights: np.ndarray
    frequency: str | None = None
    search: dict[str, float] = field(default_factory=dict)  # validation MASE per input length searched
    fit_seconds: float = 0.0

    @property
    def min_history(self) -> int:
        return self.config.history

    def refit(self, series: Sequence[np.ndarray]) -> GlobalModel:
        """A read-out of the same settings and input length fitted on other series (calibration)."""
        return fit_global(series, self.config, self.input_length)

    def kernels(self) -> np.ndarray:
        """The REM bank's last rows [K, L] over this model's input length."""
        return rem_kernels(self.config.spec, self.config.period, self.input_length)

    def features(self, windows: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(features [n, F], scales [n]) of raw windows [n, L] whose observed steps are `mask` [n, L]."""
        return _features(windows, mask, self.config, self.kernels())

    def forecast(self, histories: Sequence[np.ndarray], batch: int = 4096) -> np.ndarray:
        """The next H values [S, H] of each history (raw values, oldest first; any length of at least
        `min_history`: shorter than L is masked at the start)."""
        short = [i for i, h in enumerate(histories) if len(h) < self.min_history]
        if short:
            raise ValueError(
                f"{len(short)} series have fewer than min_history = {self.min_history} values "
                f"(the first: series {short[0]} with {len(histories[short[0]])})"
            )
        return readout.forecast(self.weights, histories, self.config.fit_settings, self.kernels(), batch)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "rem-readout-global",
            "schema_version": SCHEMA_VERSION,
            "config": asdict(self.config),
            "input_length": self.input_length,
            "min_history": self.min_history,
            "frequency": self.frequency,
            "search": self.search,
            "fit_seconds": round(self.fit_seconds, 3),
            "weights": self.weights.tolist(),
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
            search=dict(d.get("search") or {}),
            fit_seconds=float(d.get("fit_seconds") or 0.0),
        )

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json()) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> GlobalModel:
        return cls.from_json(json.loads(Path(path).read_text()))


_series_windows = readout.series_windows  # every training window of one series


def _features(
    x: np.ndarray, m: np.ndarray, cfg: PanelConfig, kernels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    return readout.features(x, m, cfg.period, cfg.n_lags, kernels)


def _accumulate(
    series: Iterable[np.ndarray],
    cfg: PanelConfig,
    length: int,
    kernels: np.ndarray,
    previous: np.ndarray | None = None,
) -> readout.NormalEquations | None:
    """One pass's normal equations over every window of `series` (None when none has a window)."""
    assert kernels.shape[1] == length
    return readout.accumulate(series, cfg.fit_settings, kernels, previous)


def fit_global(series: Iterable[np.ndarray], cfg: PanelConfig, input_length: int) -> GlobalModel:
    """The read-out fitted on every window of every series, read one at a time, once per pass: IRLS
    passes (`cfg.irls` > 0) read them again, so they need a sequence; one pass takes any iterable (a
    generator of series too many to hold)."""
    start = time.perf_counter()
    kernels = rem_kernels(cfg.spec, cfg.period, input_length)
    sol = readout.fit_weights(series, cfg.fit_settings, kernels)
    return GlobalModel(cfg, input_length, sol, fit_seconds=time.perf_counter() - start)


def seasonal_naive_scale(v: np.ndarray, period: int) -> float:
    """MASE's denominator: the in-sample mean |v_t − v_{t−m}| (m = period, or 1 when the series is not
    longer than a period); 1 where that is 0 (a constant series)."""
    m = period if len(v) > period else 1
    d = float(np.mean(np.abs(v[m:] - v[:-m]))) if len(v) > m else 0.0
    return d if d > 0 else 1.0


def mase(insample: Sequence[np.ndarray], actual: np.ndarray, forecast: np.ndarray, period: int) -> np.ndarray:
    """MASE per series [S] (Hyndman & Koehler 2006: scaled by the in-sample seasonal naive MAE)."""
    scale = np.array([seasonal_naive_scale(np.asarray(v, dtype=np.float64), period) for v in insample])
    return np.abs(actual - forecast).mean(1) / scale


def smape(actual: np.ndarray, forecast: np.ndarray) -> np.ndarray:
    """sMAPE per series [S], in percent: mean 200·|y − ŷ| / (|y| + |ŷ|) (the M3 competition's)."""
    den = np.abs(actual) + np.abs(forecast)
    return (200.0 * np.abs(actual - forecast) / np.where(den > 0, den, 1.0)).mean(1)


def mape(actual: np.ndarray, forecast: np.ndarray) -> np.ndarray:
    """MAPE per series [S], in percent: mean 100·|y − ŷ| / |y| (the Tourism competition's)."""
    return (100.0 * np.abs(actual - forecast) / np.maximum(np.abs(actual), _TINY)).mean(1)


def _validation(series: Sequence[np.ndarray], cfg: PanelConfig) -> tuple[list[np.ndarray], list[int]]:
    """Training parts (the last H held out) of the series long enough to hold out and still forecast."""
    keep = [i for i, v in enumerate(series) if len(v) >= cfg.history + cfg.horizon]
    return [np.asarray(series[i][: -cfg.horizon], dtype=np.float64) for i in keep], keep


def train_global(series: Sequence[np.ndarray], cfg: PanelConfig, frequency: str | None = None) -> GlobalModel:
    """Search the input length (in periods) on validation when `cfg.input_periods` is None, then fit on
    every window of every series. Validation: each series' last H values held out, the read-out fitted
    on what comes before and scored by mean MASE on them; the series' hold-outs are never fitted on."""
    start = time.perf_counter()
    search: dict[str, float] = {}
    periods = (cfg.input_periods,) if cfg.input_periods is not None else INPUT_PERIODS
    if len(periods) > 1:
        fit_part, keep = _validation(series, cfg)
        held = np.array([np.asarray(series[i][-cfg.horizon :], dtype=np.float64) for i in keep])
        for k in periods:
            length = k * cfg.period if cfg.period > 1 else 4 * k
            model = fit_global(fit_part, cfg, length)
            search[str(length)] = float(np.mean(mase(fit_part, held, model.forecast(fit_part), cfg.period)))
        best = int(min(search, key=lambda k: search[k]))
    else:
        best = periods[0] * cfg.period if cfg.period > 1 else 4 * periods[0]
    model = fit_global(series, cfg, best)
    model.search, model.frequency = search, frequency
    model.fit_seconds = time.perf_counter() - start
    return model


# -- CLI -------------------------------------------------------------------------------------------

cli = typer.Typer(add_completion=False, help=__doc__.split("\n\n")[0])


def _period_of(frequency: str) -> int:
    """The cycle of a frequency alias: monthly 12, quarterly 4, hourly 24, daily 7, else 1."""
    table = {"1MS": 12, "1ME": 12, "3MS": 4, "3ME": 4, "12MS": 1, "12ME": 1, "1h": 24, "1D": 7, "7D": 52}
    return table.get(frequency, 1)


@cli.command()
def train(
    data: Annotated[Path, typer.Option(help="a long file (CSV or Parquet): id, timestamp, target")],
    horizon: Annotated[int, typer.Option(help="steps to forecast")],
    out: Annotated[Path, typer.Option(help="folder for model.json")] = Path("runs/panel"),
    period: Annotated[
        int | None, typer.Option(help="the cycle in steps (default: from the frequency)")
    ] = None,
    input_periods: Annotated[int | None, typer.Option(help="L in periods (default: searched)")] = None,
    id_column: Annotated[str | None, typer.Option()] = None,
    timestamp_column: Annotated[str | None, typer.Option()] = None,
    target_column: Annotated[str | None, typer.Option()] = None,
    sort: Annotated[bool, typer.Option(help="sort rows by series and time")] = False,
    fill: Annotated[str, typer.Option(help="none, linear, ffill or zero")] = "none",
) -> None:
    """Train a global model on every series of a long file."""
    from export.data import DataError, ReadOptions, load_panel

    try:
        panel = load_panel(
            data,
            ReadOptions(
                id_column=id_column,
                timestamp_column=timestamp_column,
                target_column=target_column,
                sort=sort,
                fill=fill,
            ),
        )
    except DataError as e:
        raise typer.BadParameter(str(e), param_hint="--data") from None
    cfg = PanelConfig(
        horizon=horizon, period=period or _period_of(panel.frequency), input_periods=input_periods
    )
    try:
        model = train_global([s.values for s in panel.series], cfg, frequency=panel.frequency)
    except ValueError as e:  # too short for a window: said as an error, not a traceback
        raise typer.BadParameter(str(e), param_hint="--data") from None
    path = model.save(out / "model.json")
    typer.echo(
        f"{len(panel)} series ({panel.frequency}), L = {model.input_length}, "
        f"min history {model.min_history}, fitted in {model.fit_seconds:.2f} s: {path}"
    )


@cli.command("export")
def export_command(
    model: Annotated[Path, typer.Option(help="a model.json written by train")],
    name: Annotated[str, typer.Option(help="the model's name in the repository")],
    repository: Annotated[Path, typer.Option(help="the model repository the service reads")] = Path(
        "model_repository"
    ),
    version: Annotated[int | None, typer.Option(help="the version to write (default: the next)")] = None,
    channel: Annotated[str, typer.Option(help="the name the service gives the forecast's one channel")] = "y",
    data: Annotated[
        Path | None,
        typer.Option(help="the long file it was trained on: calibrates prediction intervals (else none)"),
    ] = None,
    sort: Annotated[bool, typer.Option(help="sort the --data rows by series and time")] = False,
) -> None:
    """Publish a global model as an ONNX graph into a model repository (checked against the numpy model),
    with intervals pooled across the series of `--data`."""
    from export.data import DataError, load_panel
    from export.global_onnx import calibrate_global, export_global
    from export.publish import VersionExistsError

    fitted = GlobalModel.load(model)
    intervals, said = None, "no intervals (give --data, the training file, to calibrate them)"
    if data is not None:
        try:
            panel = load_panel(data, sort=sort)
        except DataError as e:
            raise typer.BadParameter(str(e), param_hint="--data") from None
        intervals, said = calibrate_global(fitted, [s.values for s in panel.series])
    try:
        folder = export_global(fitted, repository, name, version, channel, intervals)
    except (ValueError, VersionExistsError) as e:
        raise typer.BadParameter(str(e)) from None
    typer.echo(
        f"{name} version {folder.name}: L = {fitted.input_length}, H = {fitted.config.horizon}, "
        f"min history {fitted.min_history}, {said}: {folder}"
    )


@cli.command()
def forecast(
    model: Annotated[Path, typer.Option(help="a model.json written by train")],
    data: Annotated[Path, typer.Option(help="a long file of histories (any series, seen or not)")],
    out: Annotated[Path | None, typer.Option(help="CSV to write (default: print)")] = None,
    sort: Annotated[bool, typer.Option()] = False,
) -> None:
    """Forecast every series of a long file (series never seen in training included)."""
    import pandas as pd

    from export.data import DataError, load_panel

    fitted = GlobalModel.load(model)
    try:
        panel = load_panel(data, sort=sort)
    except DataError as e:
        raise typer.BadParameter(str(e), param_hint="--data") from None
    values = fitted.forecast([s.values for s in panel.series])
    rows = []
    offset = pd.tseries.frequencies.to_offset(panel.frequency)
    for s, f in zip(panel.series, values, strict=True):
        stamps = pd.date_range(pd.Timestamp(s.timestamps[-1]) + offset, periods=len(f), freq=offset)
        rows += [(s.id, t, float(v)) for t, v in zip(stamps, f, strict=True)]
    frame = pd.DataFrame(rows, columns=["unique_id", "ds", "y_hat"])
    if out is None:
        typer.echo(frame.to_csv(index=False), nl=False)
    else:
        frame.to_csv(out, index=False)
        typer.echo(f"{len(panel)} series forecast: {out}")


if __name__ == "__main__":
    cli()
