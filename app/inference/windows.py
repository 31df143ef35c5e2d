"""The rules every protocol's inputs and answers follow, written once: how many series, how long a history,
which values a window may hold, where a window sits in its cycle and calendar, and that an answer is
finite. Each protocol's codec turns its wire format into arrays and names the fields its own way (it
passes the field paths); the rule and its message are these.

Every error is an `InvalidInput` (or `NonFiniteResult`) naming the field and the limit broken.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache

import numpy as np

from app.artifacts.cycle import window_phase
from app.artifacts.manifest import Manifest
from app.core.errors import InvalidInput, NonFiniteResult

FLOAT32_MAX = float(np.finfo(np.float32).max)


@cache
def input_bound(input_length: int) -> float:
    """The largest |value| a window may hold: the graph normalises each window by its variance in
    float32, whose sum of L squared deviations (each at most (2·max|x|)²) must stay below float32's max.
    Rounded down to a power of ten so that clients read a plain number: 1e17 for L = 96 (measured on
    the shipped models: the first non-finite forecast comes at 1e19)."""
    exact = math.sqrt(FLOAT32_MAX / input_length) / 2
    return float(10 ** math.floor(math.log10(exact)))


def check_series_count(n: int, limit: int, field: str, what: str = "series") -> None:
    if n > limit:
        raise InvalidInput(f"{field} has {n} {what}; at most {limit} are accepted", field=field, limit=limit)


def check_history_length(n: int, manifest: Manifest, max_history: int, field: str) -> None:
    L = manifest.input_length
    if n < L:
        raise InvalidInput(
            f"{field} has {n} points; the model needs at least {L} (its input length)",
            field=field,
            limit=L,
        )
    if n > max_history:
        raise InvalidInput(
            f"{field} has {n} points; at most {max_history} are accepted per series",
            field=field,
            limit=max_history,
        )


def last_window(
    history: np.ndarray, manifest: Manifest, max_history: int, field: str, path_of: Callable[[int, int], str]
) -> np.ndarray:
    """A series' history [n, C] (float64, as sent) -> its last L rows as the model's float32 window.

    The history's length is checked, and the window's values against what the model's float32
    arithmetic can normalise (`input_bound`), as sent: the float32 cast after it cannot overflow. Only
    the window counts: older values are never read. `path_of(row, channel)` names a value for the error
    (its row in the history as sent)."""
    n = len(history)
    check_history_length(n, manifest, max_history, field)
    L = manifest.input_length
    window = history[n - L :]
    bound = input_bound(L)
    if not np.abs(window).max() <= bound:
        row, c = (int(i) for i in np.argwhere(~(np.abs(window) <= bound))[0])
        path = path_of(n - L + row, c)
        raise InvalidInput(
            f"{path} is too large for the model: its float32 arithmetic needs |x| <= {bound:g}",
            field=path,
            limit=bound,
        )
    return window.astype(np.float32)


def check_windows(windows: np.ndarray, input_length: int, path_of: Callable[[int, int, int], str]) -> None:
    """Windows [n, L, C] given as tensors: every value finite and within `input_bound`."""
    bound = input_bound(input_length)
    bad = ~(np.abs(windows) <= bound)  # NaN and inf included
    if bad.any():
        n, t, c = (int(i) for i in np.argwhere(bad)[0])
        path = path_of(n, t, c)
        raise InvalidInput(
            f"{path} = {windows[n, t, c]!r} is outside what the model's float32 arithmetic can normalise: "
            f"|x| <= {bound:g}, finite",
            field=path,
            limit=bound,
        )


def utc(start: datetime) -> datetime:
    """A naive timestamp is UTC (the documented rule), made explicit."""
    return start if start.tzinfo is not None else start.replace(tzinfo=UTC)


def in_model_zone(start: datetime, manifest: Manifest) -> datetime:
    """A served `start` as the model reads it: a naive one is in the model's zone (UTC for a model without
    one, as `utc`; in the autumn repeat, the first of the two readings), an aware one is the instant it
    names, shown in the model's zone. A UTC model keeps an aware start's own offset, as before zones."""
    zone = manifest.zone
    if zone is None:
        return utc(start)
    if start.tzinfo is None:
        return start.replace(tzinfo=zone)
    return start.astimezone(zone)


def window_phase_of(manifest: Manifest, start: datetime | None, n_values: int, field: str) -> int | None:
    """The window's phase when the model has a seasonal cycle (None otherwise); such a model cannot run
    without the series' `start`, the timestamp of its first value."""
    cycle = manifest.cycle
    if cycle is None:
        return None
    if start is None:
        raise InvalidInput(
            f"{field} is required by this model: it aligns a seasonal cycle of period {cycle.period} steps "
            f"of {cycle.step_seconds:g} s to the timestamp of the window's first value",
            field=field,
        )
    return window_phase(
        start, n_values, manifest.input_length, cycle.period, cycle.step_seconds, manifest.timezone
    )


def check_calendar_anchor(manifest: Manifest, start: datetime, field: str) -> None:
    """A model of calendar frequency (every N months, on the 1st or the last day) steps whole months from
    `start`, which must be on that anchor."""
    months = manifest.calendar
    if months is not None and not months.on_anchor(start):
        raise InvalidInput(
            f"{field} is {start.date().isoformat()}, but model {manifest.name} steps {manifest.frequency} "
            f"(every {months.months} month(s), stamped on {months.anchor}): start must be on {months.anchor}",
            field=field,
            limit=manifest.frequency,
        )


def check_horizon(requested: int | None, manifest: Manifest, field: str = "horizon") -> int:
    """The steps asked for (the model's horizon when None), between 1 and the model's horizon."""
    if requested is None:
        return manifest.horizon
    if not 1 <= requested <= manifest.horizon:
        raise InvalidInput(
            f"{field} must be between 1 and the model horizon {manifest.horizon}, got {requested}",
            field=field,
            limit=manifest.horizon,
        )
    return requested


def require_finite(arrays: list[np.ndarray], field_of: Callable[[int], str]) -> None:
    """Never a null where the schema promises a number: the answer's arrays (each [S, ...], one row per
    series: the forecast and any bounds) must be finite for every series, or the error names the first
    series that is not (within the input bound, yet the model overflowed on it)."""
    if all(np.isfinite(a).all() for a in arrays):  # the usual case, in one pass each
        return
    finite = np.logical_and.reduce([np.isfinite(a.reshape(len(a), -1)).all(axis=1) for a in arrays])
    where = field_of(int(np.argmin(finite)))
    raise NonFiniteResult(
        f"the model's answer for {where} is not finite: its values are outside what the model can handle; "
        "rescale them",
        field=where,
    )
