"""Frames in and out: a long DataFrame's columns for the model's channels, its timestamps read in the
model's zone (`_aware`, `_ordered`: the trainer's rule), the steps after each series' last row and a
short window's start (`rsa_core.steps`, the one stepping rule), and the forecast's long frame with its
column names (`forecast_columns`)."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Sequence
from datetime import tzinfo
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from rsa_client.models import ModelSpec
from rsa_core.calendar import calendar_step
from rsa_core.frequency import Frequency, steps_ok
from rsa_core.steps import shifted, steps_after
from rsa_core.wallclock import localize
from rsa_core.written import first_problem, has_offsets, read_written
from rsa_core.zones import model_zone

# The trainer's rule of naive local times, by the name the client's tests knew it under.
_wall_clock = localize

ONE_SERIES = "series"  # the id a frame without an id column is sent under


def warn_user(message: str) -> None:
    """A UserWarning shown at the caller's own line, the first frame outside this package: the calls go
    through `one_series` and through each other, so a fixed stacklevel pointed inside the client."""
    level, frame = 2, inspect.currentframe()
    frame = frame.f_back if frame is not None else None
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("rsa_client."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


_Call = TypeVar("_Call", bound=Callable[..., Any])


def one_series(method: _Call) -> _Call:
    """A frame without its `id_col` is one series, as Nixtla's client reads it (a frame of `ds, y` alone):
    the call gets the id column (`ONE_SERIES`, in `X_df` too) and its answer, a frame, loses it again; a
    frame whose times repeat holds several series, and is refused naming `id_col`. The wrapped method
    takes `df`, `id_col`, `time_col` and, where it has one, `X_df`."""
    signature = inspect.signature(method)

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        df, id_col = bound.arguments["df"], bound.arguments["id_col"]
        if not isinstance(df, pd.DataFrame) or id_col in df.columns:
            return method(*bound.args, **bound.kwargs)
        time_col = bound.arguments["time_col"]
        if time_col in df.columns and df[time_col].duplicated().any():
            raise ValueError(
                f"df has no id column {id_col!r} and its {time_col!r} repeats: several series; name the "
                f"column that tells them apart with id_col=... (the columns are {list(df.columns)})"
            )
        bound.arguments["df"] = df.assign(**{id_col: ONE_SERIES})
        x_df = bound.arguments.get("X_df")
        if isinstance(x_df, pd.DataFrame) and id_col not in x_df.columns:
            bound.arguments["X_df"] = x_df.assign(**{id_col: ONE_SERIES})
        out = method(*bound.args, **bound.kwargs)
        if isinstance(out, pd.DataFrame) and id_col in out.columns:
            attrs = dict(out.attrs)
            out = out.drop(columns=id_col)
            out.attrs.update(attrs)
        return out

    return call  # type: ignore[return-value]


def forecast_columns(model: str, channels: Sequence[str]) -> list[str]:
    """The forecast's column names, NeuralForecast's and TimeGPT's rule: the model's name for a one-channel
    model (its intervals `{model}-lo-80`, `{model}-hi-80`), `{model}-{channel}` for each channel of a wider
    one. The same on every tabular path (this client, `python -m batch score`, `export.panel forecast`),
    never the target's own name, so a forecast merges with the actuals without suffixes."""
    if len(channels) == 1:
        return [model]
    return [f"{model}-{c}" for c in channels]


def _forecast_prefix(model: str, columns: list[str]) -> Any:
    """The forecast's column for a channel column (`forecast_columns`); the actual values keep theirs."""
    named = dict(zip(columns, forecast_columns(model, columns), strict=True))
    return lambda name: named[name]


def _channel_columns(df: pd.DataFrame, spec: ModelSpec, target_col: str | None = None) -> list[str]:
    """The frame's columns for the model's channels: `target_col` (a one-channel model's target, any
    name), else the channels' own names, else `y` for a one-channel model."""
    if target_col is not None:
        if len(spec.channels) != 1:
            raise ValueError(
                f"target_col names the target of a one-channel model; model {spec.name} reads the channels "
                f"{spec.channels} (columns of those names)"
            )
        if target_col not in df.columns:
            raise ValueError(f"target_col {target_col!r} is not a column of the frame: {list(df.columns)}")
        return [target_col]
    if all(c in df.columns for c in spec.channels):
        return list(spec.channels)
    if len(spec.channels) == 1 and "y" in df.columns:
        return ["y"]
    absent = [c for c in spec.channels if c not in df.columns]
    raise ValueError(f"model {spec.name} reads channels {spec.channels}; the frame lacks {absent}")


def read_times(df: pd.DataFrame, time_col: str) -> pd.DataFrame:
    """`df` with a `time_col` of text ("2015-01-01", "Jan 2015", "2015 Jan", "2015Q1", "1991 W06",
    "01/02/2015"...) read as naive dates by the exporter's rule (`rsa_core.written`: one format for the
    column, the one that reads it all), so that the client dates, sorts and steps a frame read from a CSV
    as `export.panel` reads the file itself; a column of datetimes, or of text with UTC offsets (instants,
    ISO 8601), is left as it is. Numbers are read as their text (years such as 1981, as fpp3's yearly
    data and the exporter's `year` column hold them; 20150701; R's decimal years, 1991.5 for July 1991, as
    fpp2's data hold them), not as nanoseconds since 1970 as pandas would. A cell that does not read, or a
    day/month order the column leaves open (every date reads both ways), is a ValueError naming the row and
    how to say it."""
    if time_col not in df.columns or pd.api.types.infer_dtype(df[time_col], skipna=False) not in (
        "string",
        "integer",
        "floating",
    ):
        return df
    cells = df[time_col].astype(str).str.strip().to_numpy(dtype=object)
    if has_offsets(cells):
        return df
    read = read_written(cells)
    problem = first_problem(cells, read, time_col)
    if problem is not None:
        key = df.index[problem.at]
        row = key.item() if isinstance(key, np.generic) else key
        call = f"pd.to_datetime(df[{time_col!r}], "
        how = call + ("dayfirst=True) (or False, or format=...)" if read.rival is not None else "format=...)")
        fix = "" if problem.fixed else f"; convert it with {how}"
        raise ValueError(f"row {row!r}, column {time_col!r}: {problem.said}{fix}")
    out = df.copy()
    out[time_col] = pd.to_datetime(read.stamps)
    return out


def _aware(column: pd.Series, zone: str | None, ids: np.ndarray | None = None) -> pd.Series:
    """Timestamps with their zone: a naive one is in the model's `zone` (UTC without one), read by the
    trainer's rule (`rsa_core.wallclock.localize`: in the column's row order, the autumn repeat's second
    reading once the clock has gone back; `ids`, one per row, keeps the rule within each series). A time
    the spring change skips is refused (ValueError naming the row, and its series with `ids`)."""
    stamps = pd.to_datetime(column)
    if stamps.dt.tz is not None:
        return stamps
    if zone is None:
        return stamps.dt.tz_localize("UTC")
    starts = None
    if ids is not None:
        ids = np.asarray(ids)
        starts = np.r_[True, ids[1:] != ids[:-1]][: len(ids)]
    utc, skipped = localize(stamps.to_numpy(), zone, starts)
    if skipped.any():
        i = int(np.argmax(skipped))
        sid = None if ids is None else ids[i].item() if isinstance(ids[i], np.generic) else ids[i]
        series = f"series {sid!r}, " if ids is not None else ""
        more = int(skipped.sum()) - 1
        raise ValueError(
            f"{series}row {column.index[i]!r}, column {column.name!r}: {stamps.iloc[i]} does not exist in "
            f"{zone}: the clocks skip it (daylight saving)" + (f" (and {more} more rows)" if more else "")
        )
    instants = pd.Series(utc, index=column.index, name=column.name).dt.tz_localize("UTC")
    return instants.astype(f"datetime64[{stamps.dt.unit}, UTC]").dt.tz_convert(zone)  # the input's unit


def _ordered(
    df: pd.DataFrame, id_col: str, time_col: str, zone: str | None
) -> tuple[pd.DataFrame, np.ndarray]:
    """`df` sorted by series and by the instant each row names, and those instants (naive UTC
    datetime64[ns]): naive times are read in the model's `zone` in each series' own row order first (the
    trainer's rule, `_aware`), then sorted; sorting the wall clock first would interleave the two
    readings of a repeated autumn hour (02:00, 02:15, ... twice)."""
    frame = df.sort_values(id_col, kind="stable")  # each series' rows in the frame's own order
    instants = _aware(frame[time_col], zone, frame[id_col].to_numpy())
    utc = instants.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy().astype("datetime64[ns]")
    order = np.lexsort((utc, pd.factorize(frame[id_col], sort=True)[0]))
    return frame.iloc[order], utc[order]


def _check_steps(ids: np.ndarray, stamps: pd.Series, frequency: Frequency | None) -> None:
    """ValueError naming the first series whose rows do not step by `frequency` one after the other (a
    missing row, a repeated time, a step back), before any request: the service reads a series' values as
    consecutive steps from its `start`, so every value before such a gap would be dated a step late, and a
    cycle read out of phase. The rule is the service's for a request's `timestamps`
    (`rsa_core.frequency.steps_ok`: months on their anchor, days on the wall clock, shorter steps on the
    instant), every series at once. `ids` and `stamps` one per row, each series' rows together and in
    time order; `frequency` None (a version exported without one): nothing to check."""
    ids = np.asarray(ids)
    if frequency is None or not frequency.seconds or len(ids) < 2:
        return
    stamps = pd.to_datetime(stamps)  # strings read; times of several offsets stay Timestamps (object)
    typed = pd.api.types.is_datetime64_any_dtype(stamps)
    ok = steps_ok(stamps if typed else [pd.Timestamp(t) for t in stamps], frequency)
    bad = np.flatnonzero(~(ok | (ids[1:] != ids[:-1])))  # a pair across two series is no step
    if not bad.size:
        return
    k = int(bad[0]) + 1
    sid, row = (x.item() if isinstance(x, np.generic) else x for x in (ids[k], stamps.index[k]))
    raise ValueError(
        f"series {sid!r}: its rows must step by {frequency.freq}, one after the other, but "
        f"{stamps.iloc[k]} follows {stamps.iloc[k - 1]} (row {row!r}): the service reads the values as "
        "consecutive steps, so those before would be dated late; insert a row with NaN for each missing "
        "step (utilsforecast's fill_gaps does it) and drop repeated times"
    )


def _wire_ids(keys: Sequence[Any]) -> dict[str, Any]:
    """The ids as the JSON routes carry them (text), each mapped back to the frame's own key, so an
    answer names its series as `df` did (an int id stays an int, as `forecast` and `cross_validation`
    keep it). Two keys that read alike as text (1 and "1") could not be told apart in the answer."""
    wire: dict[str, Any] = {}
    for key in keys:
        text = str(key)
        if text in wire and wire[text] != key:
            raise ValueError(f"series ids {wire[text]!r} and {key!r} read alike as text: rename one")
        wire[text] = key
    return wire


def _model_frequency(spec: ModelSpec) -> Frequency | None:
    """The model's step as `rsa_core.frequency` reads it; None where the version does not say."""
    if not spec.frequency or not spec.frequency_seconds:
        return None
    return Frequency(spec.frequency, float(spec.frequency_seconds))


def _start(column: pd.Series) -> str:
    """The first timestamp of a series as /v1's `start`, as written: with its offset, or naive, which the
    service reads in the model's zone (its rule, applied in one place)."""
    return str(pd.Timestamp(pd.to_datetime(column.iloc[:1]).iloc[0]).isoformat())


def _calibrated(spec: ModelSpec, level: Sequence[float] | None) -> list[float]:
    """The levels asked for (percent), each one the version calibrated; ValueError naming those it did not."""
    levels = [float(v) for v in (level or [])]
    missing = [v for v in levels if v not in spec.levels]
    if missing:
        raise ValueError(
            f"levels {missing} are not calibrated for {spec.name} v{spec.version}: {spec.levels}"
        )
    return levels


def _bounds(ids: np.ndarray, spec: ModelSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each series' first row, its end and its id in a frame sorted by series (`ids`, one per row); a
    series shorter than the model reads (its input length, a global model's `min_history`) is refused,
    naming it, before any request."""
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    begins = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(ids)]])
    series_ids = ids[begins]
    L = spec.input_length
    least = L if spec.min_history is None else spec.min_history
    short = np.flatnonzero(ends - begins < least)
    if len(short):
        named = ", ".join(f"{series_ids[i]!r} ({ends[i] - begins[i]} rows)" for i in short[:5])
        limit = (
            f"the model's input length {L}"
            if spec.min_history is None
            else f"the model's min_history {least} (a global model forecasts {least} to {L} values)"
        )
        raise ValueError(f"{len(short)} series are shorter than {limit}: {named}")
    return begins, ends, series_ids


def _zone(spec: ModelSpec) -> tzinfo | None:
    """The model's zone, on whose wall clock its days and months step (`rsa_core.steps`); None: UTC."""
    return None if spec.timezone is None else model_zone(spec.timezone)


def _window_starts(
    spec: ModelSpec, stamps: np.ndarray, begins: np.ndarray, ends: np.ndarray, zone: tzinfo | None = None
) -> np.ndarray:
    """Unix seconds of each window's first row, the service's `start`: that row's time for a series of L
    rows or more; for a shorter one, the time L − 1 steps before its last row by the one stepping rule
    (`rsa_core.steps`: days and months on the wall clock of `zone`, the model's, shorter steps on the
    instant), as the service steps from `start`, so that its horizon stamps are the steps after the last
    row."""
    L = spec.input_length
    firsts = stamps[np.maximum(ends - L, begins)].copy()
    short = np.flatnonzero(ends - begins < L)
    if not len(short):
        return firsts
    last = np.asarray(stamps[ends[short] - 1]).astype("datetime64[s]")
    back = shifted(last, [-(L - 1)], spec.frequency_seconds or 0, calendar_step(spec.frequency), zone)
    firsts[short] = back[:, 0].astype(np.int64)
    return firsts


def _future(spec: ModelSpec, last: np.ndarray, h: int, zone: tzinfo | None = None) -> np.ndarray:
    """[S, h] datetime64[ns] of the h steps after each series' last timestamp (Unix seconds): the one
    stepping rule (`rsa_core.steps`), days and months on the wall clock of `zone` (the model's; None:
    UTC), as the service steps them from an OIP v2 `start`."""
    base = np.asarray(last).astype("datetime64[s]").astype("datetime64[ns]")
    return steps_after(base, h, spec.frequency_seconds or 0, calendar_step(spec.frequency), zone)


def _long_frame(
    spec: ModelSpec,
    out: dict[str, np.ndarray],
    levels: list[float],
    columns: list[str],
    series_ids: np.ndarray,
    last: np.ndarray,
    h: int,
    id_col: str,
    time_col: str,
) -> pd.DataFrame:
    S = len(series_ids)
    data: dict[str, Any] = {
        id_col: np.repeat(series_ids, h),
        time_col: _future(spec, last, h, _zone(spec)).reshape(-1),
    }
    for c, name in enumerate(forecast_columns(spec.name, columns)):
        data[name] = out["forecast"][:, :, c].reshape(-1)
        for v in levels:
            data[f"{name}-lo-{v:g}"] = out[f"forecast_lo_{v:g}"][:, :, c].reshape(-1)
            data[f"{name}-hi-{v:g}"] = out[f"forecast_hi_{v:g}"][:, :, c].reshape(-1)
    frame = pd.DataFrame(data)
    assert len(frame) == S * h
    return frame
