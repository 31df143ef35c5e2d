"""Backtests and anomaly checks over a series' own history, protocol-neutral: which windows to forecast
from, built by the same rules as a forecast's (`windows.last_window_filled`, `window_phase_of`), and what
to compare with what after the engine ran them all as one batch.

A backtest (`cross_validation`) forecasts `horizon` steps from `n_windows` cutoffs, `step` apart, the
last one `horizon` steps before the history's end (NeuralForecast's and TimeGPT's convention), and sets
each forecast beside the actual values that followed. An anomaly check forecasts each checked point
from the window that ends `lead` steps before it (`lead` = 1: rolling one-step forecasts) and flags the
points outside the model's calibrated interval at the level asked for.

Every error is an `InvalidInput` naming the request's field and the limit broken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from app.artifacts.manifest import Manifest
from app.core.errors import InvalidInput
from app.inference.metrics import seasonal_naive_scale
from app.inference.windows import (
    began_after,
    check_history_length,
    last_window_filled,
    n_points,
    window_phase_of,
)

__all__ = [
    "History",
    "WindowBatch",
    "anomaly_points",
    "backtest_cutoffs",
    "check_window_count",
    "least_history",
    "naive_scale",
    "season_of",
    "window_batch",
]


@dataclass(frozen=True)
class History:
    """One request series as arrays: values [n, C] float64 in the model's channel order (NaN: missing),
    its `start` in the model's zone (or None), the request field that names it (`series[2]`), the
    path of value (row, channel) for errors, and the nulls sent before a global model's series began
    (`windows.not_started`: its cutoffs, checked points and refits count from its first value)."""

    id: str | None
    values: np.ndarray
    start: datetime | None
    field: str
    path_of: Callable[[int, int], str]
    before: int = 0


@dataclass(frozen=True)
class WindowBatch:
    """The windows of many cutoffs of many series, as one batch for the engine: windows [N, L, C]
    float32, phases [N] (a cycle model) or None, and per window the values it filled."""

    windows: np.ndarray
    phases: np.ndarray | None
    filled: np.ndarray


def least_history(manifest: Manifest) -> int:
    """The fewest values a window may be built from: the input length, or a global model's min_history."""
    return manifest.panel.min_history if manifest.panel is not None else manifest.input_length


def season_of(manifest: Manifest) -> int:
    """The seasonal period MASE's naive forecast uses: the model's cycle (a global model's fitted period),
    else 1 (the naive forecast)."""
    if manifest.cycle is not None:
        return manifest.cycle.period
    if manifest.panel is not None:
        return manifest.panel.period
    return 1


def backtest_cutoffs(
    n: int, manifest: Manifest, horizon: int, n_windows: int, step: int, field: str, before: int = 0
) -> list[int]:
    """The cutoffs (values before each forecast) of a history of n values, oldest first: the last at
    n − horizon, each `step` before the next. InvalidInput naming `n_windows` when the first would have
    fewer values before it than the model reads, or `field` when not even one window fits. `before`:
    the nulls a global model's series sends before it began (`windows.not_started`), not counted."""
    need = least_history(manifest)
    m = n - before
    most = (m - horizon - need) // step + 1 if m >= need + horizon else 0
    after = began_after(before)
    if most < 1:
        raise InvalidInput(
            f"{field} has {n_points(m)}{after}; a backtest of horizon {horizon} needs at least "
            f"{need + horizon} ({need} the model reads, then {horizon} to compare with)",
            field=field,
            limit=need + horizon,
        )
    if n_windows > most:
        raise InvalidInput(
            f"n_windows = {n_windows}, but {field} ({n_points(m)}{after}) holds at most {most} windows of "
            f"horizon {horizon}, {step} apart, each after {need} points the model reads",
            field="n_windows",
            limit=most,
        )
    last = n - horizon
    return [last - step * (n_windows - 1 - j) for j in range(n_windows)]


def anomaly_points(
    n: int, manifest: Manifest, lead: int, last: int | None, field: str, before: int = 0
) -> list[int]:
    """The points to check, oldest first: every point with a full window `lead` steps before it, or the
    last `last` of them (the online form). InvalidInput naming `last` when fewer exist, or `field` when
    none does. `before`: the nulls a global model's series sends before it began
    (`windows.not_started`), never checked nor counted."""
    least = least_history(manifest) + lead - 1
    first, m = before + least, n - before
    available = n - first
    after = began_after(before)
    if available < 1:
        raise InvalidInput(
            f"{field} has {n_points(m)}{after}; checking for anomalies {lead} step(s) ahead needs at least "
            f"{least + 1} (the {least - lead + 1} the model reads, then the points checked)",
            field=field,
            limit=least + 1,
        )
    if last is not None:
        if last > available:
            raise InvalidInput(
                f"last = {last}, but {field} ({n_points(m)}{after}) has only {n_points(available)} with a "
                "full window before them",
                field="last",
                limit=available,
            )
        first = n - last
    return list(range(first, n))


def check_window_count(count: int, limit: int, field: str, what: str) -> None:
    """All the windows of one request (series × cutoffs or points) against the rows a request may send
    to the model (RSA_MAX_SERIES_PER_REQUEST, the forecast's series limit)."""
    if count > limit:
        raise InvalidInput(
            f"the request asks for {count} forecasts ({what}); at most {limit} are accepted per request "
            "(RSA_MAX_SERIES_PER_REQUEST)",
            field=field,
            limit=limit,
        )


def window_batch(
    histories: Sequence[History],
    cutoffs: Sequence[Sequence[int]],
    manifest: Manifest,
    max_history: int,
    max_missing_share: float,
) -> WindowBatch:
    """The model's window before each cutoff of each series (series-major), built as a forecast's last
    window is, from the values before the cutoff: the same fill of missing values, the same limits, the
    same phase from `start` (required by a cycle model)."""
    windows: list[np.ndarray] = []
    phases: list[int] = []
    filled: list[int] = []
    for history, points in zip(histories, cutoffs, strict=True):
        check_history_length(
            len(history.values), manifest, max_history, f"{history.field}.values", history.id
        )
        for t in points:
            try:
                window, count = last_window_filled(
                    history.values[:t],
                    manifest,
                    max_history,
                    max_missing_share,
                    f"{history.field}.values",
                    history.path_of,
                    history.id,
                )
            except InvalidInput as e:  # which of the windows: the user sent one history
                raise InvalidInput(
                    f"the window before {history.field}.values[{t}]: {e.message}",
                    field=e.field,
                    limit=e.limit,
                ) from None
            windows.append(window)
            filled.append(count)
            phase = window_phase_of(manifest, history.start, t, f"{history.field}.start")
            if phase is not None:
                phases.append(phase)
    return WindowBatch(
        windows=np.stack(windows),
        phases=np.array(phases, np.int64) if manifest.cycle is not None else None,
        filled=np.array(filled, np.int64),
    )


def naive_scale(values: np.ndarray, before: int, period: int) -> np.ndarray:
    """MASE's denominator per channel [C]: the seasonal naive forecast's mean absolute error over the
    history before the first cutoff (`before` values)."""
    return np.array(
        [seasonal_naive_scale(values[:before, c], period) for c in range(values.shape[1])], np.float64
    )
