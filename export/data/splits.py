"""Splits: a loaded series cut by the standard long-term-forecasting protocols (Informer /
Time-Series-Library), scaled on its training rows and exposed as sliding windows (`load_dataset`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from export.data.errors import DataError, _raise, _where
from export.data.options import ReadOptions
from export.data.reading import Series, _load
from export.data.scaling import StandardScaler

__all__ = ["ETT_DIR", "PROTOCOLS", "Dataset", "Split", "load_dataset", "split_series"]

ETT_DIR: Path = Path(__file__).resolve().parents[2] / "data" / "ETT"

#: Accepted ``protocol`` values of :func:`load_dataset` (besides "auto").
PROTOCOLS = ("ett-hour", "ett-minute", "ratio-70-10-20")


_ETT_HOUR_NAMES = frozenset({"ETTh1", "ETTh2"})
_ETT_MINUTE_NAMES = frozenset({"ETTm1", "ETTm2"})
# 12/4/4 months of 30 days, in hours; the minute variant has 4 rows per hour.
_ETT_HOUR_ENDS = (12 * 30 * 24, 16 * 30 * 24, 20 * 30 * 24)


@dataclass(frozen=True, eq=False)
class Split:
    """One split's (scaled) rows; window ``i`` is input rows ``[i, i+L)`` and target rows ``[i+L, i+L+H)``."""

    name: str
    data: np.ndarray
    timestamps: np.ndarray
    input_length: int
    horizon: int
    step_seconds: float = 0.0  # the series' sampling step; needed only for cycle phases
    timezone: str | None = None  # phases follow this zone's wall clock (None: UTC), as the service's
    # Tensor view of ``data`` (shared memory, created once) and the window offsets.
    _tensor: torch.Tensor = field(init=False, repr=False, compare=False)
    _x_offsets: torch.Tensor = field(init=False, repr=False, compare=False)
    _y_offsets: torch.Tensor = field(init=False, repr=False, compare=False)
    # floor(t / step) of every row (t in ns since the epoch), computed once; None without a step.
    _step_index: torch.Tensor | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        data = np.ascontiguousarray(self.data, dtype=np.float32)
        if data.ndim != 2:
            raise ValueError(f"split data must be [rows, channels], got shape {data.shape}")
        if len(self.timestamps) != data.shape[0]:
            raise ValueError(f"{len(self.timestamps)} timestamps for {data.shape[0]} rows")
        object.__setattr__(self, "data", data)  # frozen dataclass: set once here
        object.__setattr__(self, "_tensor", torch.from_numpy(data))
        object.__setattr__(self, "_x_offsets", torch.arange(self.input_length))
        object.__setattr__(self, "_y_offsets", torch.arange(self.horizon) + self.input_length)
        step_index = None
        if self.step_seconds > 0:
            ns = self.timestamps.astype("datetime64[ns]").astype(np.int64)
            if self.timezone is not None:  # local wall-clock time read as if UTC (app/artifacts/cycle.py)
                instants = pd.DatetimeIndex(self.timestamps.astype("datetime64[ns]")).tz_localize("UTC")
                ns = instants.tz_convert(self.timezone).tz_localize(None).asi8
            step_index = torch.from_numpy(np.floor_divide(ns, round(self.step_seconds * 1e9)))
        object.__setattr__(self, "_step_index", step_index)

    @property
    def num_windows(self) -> int:
        """Windows of stride 1 that fit entirely (none dropped)."""
        return max(0, self.data.shape[0] - self.input_length - self.horizon + 1)

    def windows(self, idx: np.ndarray | torch.Tensor | Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs ``x`` [n, L, C] and targets ``y`` [n, H, C] (float32) for window starts ``idx`` [n]."""
        starts = idx if isinstance(idx, torch.Tensor) else torch.from_numpy(np.asarray(idx, dtype=np.int64))
        starts = starts.reshape(-1).to(torch.long)
        if starts.numel() and (int(starts.min()) < 0 or int(starts.max()) >= self.num_windows):
            raise IndexError(
                f"{self.name}: window starts must lie in [0, {self.num_windows}), "
                f"got min {int(starts.min())}, max {int(starts.max())}"
            )
        starts = starts[:, None]
        return self._tensor[starts + self._x_offsets], self._tensor[starts + self._y_offsets]

    def phases(self, idx: np.ndarray | torch.Tensor | Any, period: int) -> torch.Tensor:
        """Cycle phase [n] (int64) of windows starting at ``idx``: floor(t / step) mod period for the
        UTC time t (seconds since the epoch) of each window's first row, as the service computes it
        (with a `timezone`, t is the local wall-clock time read as if UTC)."""
        if self._step_index is None:
            raise ValueError(f"{self.name}: split has no step_seconds; cannot place windows in a cycle")
        starts = idx if isinstance(idx, torch.Tensor) else torch.from_numpy(np.asarray(idx, dtype=np.int64))
        return self._step_index[starts.reshape(-1).to(torch.long)] % period

    def __repr__(self) -> str:
        return (
            f"Split(name={self.name!r}, rows={self.data.shape[0]}, channels={self.data.shape[1]}, "
            f"input_length={self.input_length}, horizon={self.horizon}, num_windows={self.num_windows})"
        )


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded CSV split into scaled train/val/test windows for one (L, H, mode, target)."""

    series: Series
    mode: str
    target: str
    channels: list[str]
    scaler: StandardScaler
    protocol: str
    borders: dict[str, tuple[int, int]]
    train: Split
    val: Split
    test: Split

    def __repr__(self) -> str:
        return (
            f"Dataset(series={self.series.name!r}, mode={self.mode!r}, target={self.target!r}, "
            f"channels={self.channels!r}, protocol={self.protocol!r}, borders={self.borders!r})"
        )


def _protocol_for(name: str, protocol: str) -> str:
    if protocol == "auto":
        if name in _ETT_HOUR_NAMES:
            return "ett-hour"
        if name in _ETT_MINUTE_NAMES:
            return "ett-minute"
        return "ratio-70-10-20"
    if protocol not in PROTOCOLS:
        raise DataError(f"unknown protocol {protocol!r}; use 'auto' or one of {list(PROTOCOLS)}")
    return protocol


def _borders(protocol: str, n: int, input_length: int, fname: str) -> dict[str, tuple[int, int]]:
    """Row ranges ``[start, end)`` per split (val/test start L rows early so their first window's
    input may reach back into the previous split, as in Informer / Time-Series-Library)."""
    L = input_length
    if protocol == "ratio-70-10-20":
        num_train = int(n * 0.7)
        num_test = int(n * 0.2)
        num_val = n - num_train - num_test
        return {
            "train": (0, num_train),
            "val": (num_train - L, num_train + num_val),
            "test": (n - num_test - L, n),
        }
    per_hour = 4 if protocol == "ett-minute" else 1
    train_end, val_end, test_end = (end * per_hour for end in _ETT_HOUR_ENDS)
    if n < test_end:
        raise DataError(
            f"{fname}: protocol {protocol!r} needs at least {test_end} rows (lines 2-{test_end + 1}), "
            f"the file has {n}; use protocol='ratio-70-10-20'"
        )
    return {"train": (0, train_end), "val": (train_end - L, val_end), "test": (val_end - L, test_end)}


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DataError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _target_problem(fname: str, columns: list[str], target: str, mode: str) -> tuple[str, str | None]:
    """The target (for "auto": OT, the ETT files' convention, else the one numeric column, else in mode M
    the first column: every column is forecast there, and the target only picks the channel plots show),
    and the problem with it, if any."""
    if target == "auto":
        if "OT" in columns:
            return "OT", None
        if len(columns) == 1 or mode == "M":
            return columns[0], None
        return target, (
            f"{_where(fname, 1)}: which column is the target? The numeric columns are {columns}: name one "
            "with --target (config: target), or forecast them all with --mode M; leave text or other "
            "unwanted columns out with --drop"
        )
    if target not in columns:
        return target, (
            f"{_where(fname, 1, target)}: unknown target column; the numeric columns are {columns} "
            "(choose one with --target, config: target)"
        )
    return target, None


def _covariate_note(series: Series, mode: str, target: str) -> str | None:
    """What this trainer does with the columns beside the target, when a user may take them for inputs:
    in mode S they are not read; in mode M each is a channel forecast on its own (shared weights, no
    channel reads another), so a 0/1 column such as a promotion flag is forecast, never used. Either way
    the global model is the one that reads covariates."""

    def is_flag(column: str) -> bool:
        v = series.values[:, series.columns.index(column)]
        return bool(np.isin(v[np.isfinite(v)], (0.0, 1.0)).all())

    others = [c for c in series.columns if c != target]
    unread = others if mode == "S" else [c for c in others if is_flag(c)]
    if not unread:
        return None
    why = (
        "are not read (--mode S reads the target only)"
        if mode == "S"
        else "hold only 0 and 1: in mode M each column is a channel forecast on its own, never an input to "
        "another's forecast"
    )
    return (
        f"columns {unread} {why}; to forecast {target!r} from them, train the global model, which reads "
        f"covariates: `python -m export.panel train --data {series.path.name} --layout wide --target-column "
        f"{target} --future {unread[0]} ...` (or --past, --static; docs/panels.md, Covariates)"
    )


def load_dataset(
    path: str | Path,
    input_length: int,
    horizon: int,
    mode: str = "M",
    target: str = "auto",
    *,
    options: ReadOptions | None = None,
    protocol: str = "auto",
    **overrides: Any,
) -> Dataset:
    """Load ``path`` with :func:`load_csv`, split it by ``protocol`` and scale it (`split_series`).

    ``mode`` "M": all numeric columns in and out; "S": only ``target``. ``target`` "auto": OT when the
    file has it (the ETT files), else its one numeric column, else in mode M its first (the channel
    plots show), else an error asking for one. ``options`` (`ReadOptions`, with any of its fields
    given as keywords in ``overrides``) go to :func:`load_csv`; the file's problems and the target's are
    reported together. ``protocol`` "auto" picks "ett-hour" for ETTh1/ETTh2, "ett-minute" for
    ETTm1/ETTm2 and "ratio-70-10-20" otherwise. The scaler is fit on the training rows of the model's
    channels only. Every split must hold at least one window of ``input_length + horizon`` rows, else
    :class:`DataError`.
    """
    L = _positive_int("input_length", input_length)
    H = _positive_int("horizon", horizon)
    if mode not in ("M", "S"):
        raise DataError(f"mode must be 'M' (multivariate) or 'S' (univariate target only), got {mode!r}")
    loaded = _load(path, ReadOptions.of(options, **overrides))
    target, problem = _target_problem(Path(path).name, loaded.columns, target, mode)
    _raise(loaded.problems + ([problem] if problem else []))
    assert loaded.series is not None
    return split_series(loaded.series, L, H, mode, target, protocol)


def split_series(
    series: Series, input_length: int, horizon: int, mode: str, target: str, protocol: str = "auto"
) -> Dataset:
    """A loaded series split by ``protocol`` for one window shape and scaled (`load_dataset`'s second
    half: several shapes of one file need it read once)."""
    L = _positive_int("input_length", input_length)
    H = _positive_int("horizon", horizon)
    fname = series.path.name
    target, problem = _target_problem(fname, series.columns, target, mode)
    _raise([problem] if problem else [])
    channels = list(series.columns) if mode == "M" else [target]
    unread = _covariate_note(series, mode, target)
    if unread:  # said in the run's notes and its report, never dropped or mixed in silently
        series = replace(series, notes=(*series.notes, unread))
    values = series.values[:, [series.columns.index(c) for c in channels]]

    chosen = _protocol_for(series.name, protocol)
    borders = _borders(chosen, len(values), L, fname)
    # Check in split order: a train split shorter than L also makes the val start negative, and is
    # reported first.
    for name, (start, end) in borders.items():
        rows = end - start
        if rows < L + H:
            lines = f"lines {start + 2}-{end + 1}" if rows > 0 else "no lines"
            if rows > 0 and series.inserted_steps:  # rows of the filled grid are not the file's lines
                lines = f"rows {start + 1}-{end} of the grid"
            raise DataError(
                f"{fname}: too few rows for split {name!r}: it has {rows} rows ({lines}) but "
                f"input_length + horizon = {L} + {H} needs at least {L + H}; use a shorter window or "
                "horizon (--input-length, --horizon) or a longer file"
            )

    train_start, train_end = borders["train"]
    scaler = StandardScaler().fit(values[train_start:train_end])
    scaled = scaler.transform(values).astype(np.float32)
    splits = {
        name: Split(
            name=name,
            data=scaled[start:end].copy(),  # own memory: splits overlap by L rows
            timestamps=series.timestamps[start:end].copy(),
            input_length=L,
            horizon=H,
            step_seconds=series.frequency_seconds,
            timezone=series.timezone,
        )
        for name, (start, end) in borders.items()
    }
    return Dataset(
        series=series,
        mode=mode,
        target=target,
        channels=channels,
        scaler=scaler,
        protocol=chosen,
        borders=borders,
        train=splits["train"],
        val=splits["val"],
        test=splits["test"],
    )
