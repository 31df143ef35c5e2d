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
from rsa_core.zones import skipped

FLOAT32_MAX = float(np.finfo(np.float32).max)
# The dates a timestamp may name, in UTC and in a model's zone: Python's datetime years 1 to 9999.
YEARS = "0001-01-01..9999-12-31"


@cache
def input_bound(input_length: int) -> float:
    """The largest |value| a window may hold: the graph normalises each window by its variance in
    float32, whose sum of L squared deviations (each at most (2·max|x|)²) must stay below float32's max.
    Rounded down to a power of ten so that clients read a plain number: 1e17 for L = 96 (measured on
    the shipped models: the first non-finite forecast comes at 1e19)."""
    exact = math.sqrt(FLOAT32_MAX / input_length) / 2
    return float(10 ** math.floor(math.log10(exact)))


def check_bound(values: np.ndarray, input_length: int, path_of: Callable[[int, int], str]) -> None:
    """InvalidInput naming the first value of `values` [n, C] (NaN: missing, allowed) whose |x| is past
    `input_bound` (`path_of(row, channel)` names it): every value a window of the model may read."""
    bound = input_bound(input_length)
    over = np.abs(values) > bound
    if over.any():
        row, c = (int(i) for i in np.argwhere(over)[0])
        path = path_of(row, c)
        raise InvalidInput(
            f"{path} is too large for the model: its float32 arithmetic needs |x| <= {bound:g}",
            field=path,
            limit=bound,
        )


def check_series_count(n: int, limit: int, field: str, what: str = "series") -> None:
    if n > limit:
        raise InvalidInput(f"{field} has {n} {what}; at most {limit} are accepted", field=field, limit=limit)


def not_started(history: np.ndarray, manifest: Manifest) -> int:
    """The rows [n, C] a global model's history sends before its first value (every channel null): the
    time before the series began (a panel's later series, its wide file's empty cells), not missing
    values of it. Its windows, backtest cutoffs and anomaly checks count from its first value, as a
    history sent without them; 0 for a model that reads full windows (no short history)."""
    if manifest.panel is None or not len(history) or not np.isnan(history[0]).all():
        return 0  # the common case, read from one row: this runs on every window of a backtest
    seen = ~np.isnan(history).all(axis=1)
    return int(np.argmax(seen)) if seen.any() else len(history)


def n_points(n: int) -> str:
    """`n` values counted in an error on a history's length: "1 point", "5 points"."""
    return f"{n} point" if n == 1 else f"{n} points"


def began_after(before: int) -> str:
    """The clause an error on a history's length adds for the nulls sent before its series began."""
    if not before:
        return ""
    return f" after its first {'null' if before == 1 else f'{before} nulls'} (before the series began)"


def check_history_length(
    n: int,
    manifest: Manifest,
    max_history: int,
    field: str,
    series_id: str | None = None,
    before: int = 0,
) -> None:
    """n values against the model's least history and `max_history` (the values sent: n + `before`, the
    nulls before a global model's series began, `not_started`)."""
    L = manifest.input_length
    if manifest.panel is not None and n < manifest.panel.min_history:
        least = manifest.panel.min_history
        named = f" (series {series_id!r})" if series_id is not None else ""
        after = began_after(before)
        raise InvalidInput(
            f"{field}{named} has {n_points(n)}{after}; the model needs at least {least} (its min_history)",
            field=field,
            limit=least,
        )
    if manifest.panel is None and n < L:
        raise InvalidInput(
            f"{field} has {n_points(n)}; the model needs at least {L} (its input length)",
            field=field,
            limit=L,
        )
    if n + before > max_history:
        raise InvalidInput(
            f"{field} has {n_points(n + before)}; at most {max_history} are accepted per series",
            field=field,
            limit=max_history,
        )


def last_window(
    history: np.ndarray,
    manifest: Manifest,
    max_history: int,
    field: str,
    path_of: Callable[[int, int], str],
    series_id: str | None = None,
) -> np.ndarray:
    """A series' history [n, C] (float64, as sent) -> its last L rows as the model's float32 window
    (a global model's history of `min_history` to L values: the rows before it NaN, which its graph
    masks; nothing is invented).

    The history's length is checked, and the window's values against what the model's float32
    arithmetic can normalise (`input_bound`), as sent: the float32 cast after it cannot overflow. Only
    the window counts: older values are never read. `path_of(row, channel)` names a value for the error
    (its row in the history as sent); `series_id`, when the client gave one, is named beside the field
    in a global model's min_history error."""
    n = len(history)
    check_history_length(n, manifest, max_history, field, series_id)
    L = manifest.input_length
    window = history[max(n - L, 0) :]
    first = n - len(window)  # the row of the window's first value in the history as sent
    check_bound(window, L, lambda row, c: path_of(first + row, c))
    if len(window) < L:  # a global model's short history (`panel`): the missing start is NaN, masked
        out = np.full((L, window.shape[1]), np.nan, dtype=np.float32)
        out[L - len(window) :] = window
        return out
    return window.astype(np.float32)


def fill_window(window: np.ndarray, rule: str) -> np.ndarray:
    """A window [L, C] with its NaN filled by `rule`, each channel on its own (every channel holds a value):
    linear (interpolation between the values around, the nearest value held at either edge), ffill (the
    last value before, the first one held at the left edge) or zero; "none" (a model trained without a
    fill) takes linear."""
    out = window.copy()
    rows = np.arange(len(window))
    for c in range(window.shape[1]):
        gaps = np.isnan(window[:, c])
        if not gaps.any():
            continue
        if rule == "zero":
            out[gaps, c] = 0.0
        elif rule == "ffill":
            known = np.where(~gaps, rows, -1)
            last = np.maximum.accumulate(known)
            last[last < 0] = int(np.argmax(~gaps))  # before the first value: the first value, held
            out[:, c] = window[last, c]
        else:
            out[gaps, c] = np.interp(rows[gaps], rows[~gaps], window[~gaps, c])
    return out


def last_window_filled(
    history: np.ndarray,
    manifest: Manifest,
    max_history: int,
    max_missing_share: float,
    field: str,
    path_of: Callable[[int, int], str],
    series_id: str | None = None,
) -> tuple[np.ndarray, int]:
    """`last_window` for a history that may hold missing values (NaN; `null` on the wire): those in the
    model's window (its last L rows) are filled by the rule the model was trained with
    (`Manifest.training_fill`) and counted; more than `max_missing_share` of the window's L x C values,
    or a channel with no value in the window, is an `InvalidInput` naming `field`, the count and the limit.
    Missing values before the window are never read; a global model's short history is filled within the
    values sent (its missing start stays NaN, masked by its graph). Returns the window and how many values
    were filled. A global model's nulls before its series began (`not_started`) are not its values:
    the window is the one of the history from its first value."""
    before = not_started(history, manifest)
    if before:
        history = history[before:]
        path_of = _shifted(path_of, before)
    check_history_length(len(history), manifest, max_history, field, series_id, before)
    L = manifest.input_length
    first = max(len(history) - L, 0)
    window = history[first:]
    missing = np.isnan(window)
    count = int(missing.sum())
    if count == 0:
        return last_window(history, manifest, max_history + before, field, path_of, series_id), 0
    allowed = math.floor(max_missing_share * window.size + 1e-9)
    if count > allowed:
        raise InvalidInput(
            f"{field} has {count} missing values among the {window.size} the model reads (its last {L} "
            f"rows); at most {allowed} ({max_missing_share:g} of them, RSA_MAX_MISSING_SHARE) are filled"
            + _ends_early(window),
            field=field,
            limit=allowed,
        )
    empty = missing.all(axis=0)
    if empty.any():
        c = int(np.argmax(empty))
        raise InvalidInput(
            f"{field}: channel {manifest.channels[c]!r} has no value in the model's window (its last {L} "
            "rows): nothing to fill it from",
            field=field,
            limit=allowed,
        )
    filled = history.copy()
    filled[first:] = fill_window(window, manifest.training_fill)
    return last_window(filled, manifest, max_history + before, field, path_of, series_id), count


def _ends_early(window: np.ndarray) -> str:
    """The clause a too-many-missing error adds where the window's last rows are empty in every channel (a
    series that ended, or whose latest values are not in yet): what to send instead."""
    empty = np.isnan(window).all(axis=1)[::-1]
    k = len(empty) if empty.all() else int(np.argmin(empty))
    if not k:
        return ""
    return (
        f"; its last {k} rows are empty (the series ends early): send it up to its last value to forecast "
        "from there"
    )


def _shifted(path_of: Callable[[int, int], str], rows: int) -> Callable[[int, int], str]:
    """`path_of` for a history cut `rows` from its start: the value's row as sent."""
    return lambda row, c: path_of(row + rows, c)


def fill_windows(
    windows: np.ndarray,
    manifest: Manifest,
    max_missing_share: float,
    field_of: Callable[[int], str],
    observed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Windows [n, L, C] given as tensors, with NaN (missing) filled as `last_window_filled` fills one
    series' window, by the same rule and limit (`field_of(i)` names window i in an error); infinities
    are left for `check_windows` to refuse. `observed` [n] (a global model's `lengths`): the values each
    row holds, its last; only those are counted and filled, as `last_window_filled` fills a short history
    within the values sent (the steps before are left as given, for the caller to mask). Returns the
    windows and the count filled in each [n]."""
    L = windows.shape[1]
    held = np.full(len(windows), L) if observed is None else np.asarray(observed)
    missing = np.isnan(windows) & (np.arange(L)[None, :, None] >= (L - held)[:, None, None])
    counts = missing.reshape(len(windows), -1).sum(axis=1)
    if not counts.any():
        return windows, counts
    out = windows.copy()
    for i in np.flatnonzero(counts):
        field = field_of(int(i))
        first = L - int(held[i])
        allowed = math.floor(max_missing_share * windows[i, first:].size + 1e-9)
        if counts[i] > allowed:
            raise InvalidInput(
                f"{field} has {int(counts[i])} missing values (NaN) among its {windows[i, first:].size}; "
                f"at most {allowed} ({max_missing_share:g} of them, RSA_MAX_MISSING_SHARE) are filled"
                + _ends_early(windows[i, first:]),
                field=field,
                limit=allowed,
            )
        empty = missing[i, first:].all(axis=0)
        if empty.any():
            channel = manifest.channels[int(np.argmax(empty))]
            raise InvalidInput(
                f"{field}: channel {channel!r} has no value: nothing to fill it from",
                field=field,
                limit=allowed,
            )
        out[i, first:] = fill_window(windows[i, first:], manifest.training_fill)
    return out, counts


def started_rows(
    windows: np.ndarray, manifest: Manifest, field_of: Callable[[int], str], lengths: np.ndarray | None
) -> np.ndarray | None:
    """A global model's windows [n, L, C] given as tensors: the values each row holds [n], its last
    (its `lengths`, or L, less the rows of NaN in every channel that begin them: the time before the
    series began, as `not_started` reads a history), each at least the model's min_history, else an
    `InvalidInput` naming the window; None for a model that reads full windows, or where every row is
    full."""
    if manifest.panel is None:
        return None
    L, least = windows.shape[1], manifest.panel.min_history
    given = np.full(len(windows), L) if lengths is None else np.asarray(lengths)
    # the rows each window holds, its `given` last: those before the first with a value are not yet its
    inside = np.arange(L)[None, :] >= (L - given)[:, None]
    seen = ~np.isnan(windows).all(axis=2) & inside  # [n, L]
    first = np.where(seen.any(axis=1), np.argmax(seen, axis=1), L)
    held = L - first
    before = given - held
    short = held < least
    if short.any():
        i = int(np.argmax(short))
        raise InvalidInput(
            f"{field_of(i)} holds {int(held[i])} values after its first {int(before[i])} rows of NaN (before "
            f"the series began); model {manifest.name} needs at least {least} (its min_history)",
            field=field_of(i),
            limit=least,
        )
    return None if lengths is None and (held == L).all() else held


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


def in_model_zone(start: datetime, manifest: Manifest, field: str = "start") -> datetime:
    """A served `start` as the model reads it: a naive one is in the model's zone (UTC for a model without
    one, as `utc`; in the autumn repeat, the first of the two readings), an aware one is the instant it
    names, shown in the model's zone. A UTC model keeps an aware start's own offset, as before zones.

    The instant must be a date in UTC and in the model's zone, years 1 to 9999 (`YEARS`): Python's
    datetimes hold no other, and every later step (the cycle's phase, the forecast's timestamps, the
    calendar) reads it in one of the two. Outside, an `InvalidInput` naming `field` and the limit. So is a
    naive start the model's zone skips (the spring change of daylight saving), as the client, the batch
    scorer, the exporter and /ui refuse it (`rsa_core.zones.skipped`, issue 46, item 8)."""
    zone = manifest.zone
    try:
        if start.tzinfo is None and zone is not None and skipped(start, zone):
            raise InvalidInput(
                f"{field} = {start.isoformat()} does not exist in the model's zone {manifest.timezone}: the "
                "clocks skip it (daylight saving); send the time as the clocks showed it, or with its UTC "
                "offset",
                field=field,
            )
        aware = start if start.tzinfo is not None else start.replace(tzinfo=zone or UTC)
        aware.astimezone(UTC)  # OverflowError when the instant itself leaves the years
        return aware if zone is None else aware.astimezone(zone)
    except OverflowError:
        where = "UTC" if zone is None else f"UTC and in the model's zone {manifest.timezone}"
        raise InvalidInput(
            f"{field} = {start.isoformat()} is not a date once read as an instant in {where}: times must lie "
            f"within years 1 to 9999 ({YEARS})",
            field=field,
            limit=YEARS,
        ) from None


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
    try:
        return window_phase(
            start, n_values, manifest.input_length, cycle.period, cycle.step_seconds, manifest.timezone
        )
    except OverflowError:  # a global model's short history: its window starts before `start`
        raise InvalidInput(
            f"{field}: the window's first step, {manifest.input_length - n_values} steps before {field}, is "
            f"not a date: times must lie within years 1 to 9999 ({YEARS})",
            field=field,
            limit=YEARS,
        ) from None


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


def check_horizon(
    requested: int | None, manifest: Manifest, field: str = "horizon", fit_hint: bool = False
) -> int:
    """The steps asked for (the model's horizon when None), between 1 and the model's horizon; above it,
    the refusal says what to do instead (`fit_hint`: a forecast's, which a refittable global read-out
    can serve by fit_forecast at that horizon)."""
    if requested is None:
        return manifest.horizon
    H = manifest.horizon
    if requested > H:  # what to do instead (issue 45, item 12)
        instead = (
            f"ask for at most {H}, or train a model of horizon {requested} "
            f"(python -m export.panel train --horizon {requested})"
        )
        panel = manifest.panel
        if fit_hint and panel is not None and panel.covariates is None and manifest.readout is not None:
            # a global read-out that keeps its refit settings: fit_forecast fits it at any horizon
            instead += (
                f", or fit this global read-out at that horizon on your series: POST "
                f'/v1/models/{manifest.name}/fit_forecast with "horizon": {requested} (docs/service.md)'
            )
        raise InvalidInput(
            f"{field} = {requested} is above model {manifest.name}'s horizon {H}, the most steps it "
            f"forecasts: {instead}",
            field=field,
            limit=H,
        )
    if requested < 1:
        raise InvalidInput(
            f"{field} must be between 1 and the model horizon {H}, got {requested}", field=field, limit=H
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
