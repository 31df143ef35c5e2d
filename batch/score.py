"""Batch scoring: a long table in, each series' last window forecast by a published model version, a long
Parquet table out (docs/batch.md).

`Forecaster.score_table` is the whole computation of one part, with the service's own code: the window and
its checks with missing values filled (`app.inference.windows.last_window_filled`), the phase
(`window_phase_of`), the calendar anchor, the graph's inputs (`app.artifacts.feed.build_feed`), the
session as the service creates it (`app.engine.session.create_session`), the intervals and their clipping
(`app.inference.intervals`), the finiteness check, and for a covariate model each series' covariate
row (`app.inference.covariates.covariate_rows`: past covariates and statics from the table's columns,
future ones from the future table, the calendar from the horizon's timestamps). For the same series run
in the same batch its numbers are the service's, bit for bit (tests/batch/test_score.py,
test_score_covariates.py).

`run` spreads the parts over Ray Data: `map_batches` with one `PartScorer` actor (one ONNX Runtime
session) per slot, CUDA where the actor was given a GPU. One part is one block: read, scored and written
by one call, so memory is bounded by the largest part, not the table.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from app.artifacts.contract import FORECAST_OUTPUT, MANIFEST_FILE, MODEL_FILE, forecast_columns
from app.artifacts.covariates import CovariateLayout
from app.artifacts.feed import build_feed
from app.artifacts.manifest import Manifest, load_manifest
from app.artifacts.repository import read_model
from app.core.config import Settings
from app.inference.covariates import SeriesCovariates, covariate_rows
from app.inference.intervals import check_levels, level_bounds
from app.inference.windows import (
    check_calendar_anchor,
    check_horizon,
    last_window_filled,
    require_finite,
    window_phase_of,
)
from batch import io
from batch.progress import Progress
from rsa_core.future import FutureProblem, future_rows_problem
from rsa_core.steps import steps_after
from rsa_core.wallclock import localize

logger = logging.getLogger("batch")
# The share of a window's values that may be missing and be filled: the service's default
# (RSA_MAX_MISSING_SHARE).
MAX_MISSING_SHARE: float = Settings.model_fields["max_missing_share"].default
T = TypeVar("T")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _shown(us: int | np.integer[Any]) -> str:
    """UTC microseconds as an ISO time."""
    return (_EPOCH + timedelta(microseconds=int(us))).isoformat()


@dataclass(frozen=True)
class Job:
    """What to score with and how the input names its columns."""

    repository: str
    model: str
    version: int | None = None  # None: the latest published version
    horizon: int | None = None  # None: the model's horizon
    levels: tuple[float, ...] = ()
    id_col: str = "unique_id"
    time_col: str = "ds"
    # Windows per session call. The default model's CPU arena grows with it: the batch job's process tree
    # peaked at 11.0 GiB with calls of 500 windows (L = 512, 87 heads) and 6.2 GiB with 256, while the raw
    # session ran no faster past 64 on this machine (bench/batch.py, 2026-11-27).
    batch_rows: int = 64
    threads: int | None = None  # intra-op threads per session; None: the CPUs the actor may use
    retries: int = 2  # further tries of a part that failed, in the actor, before Ray's own retries
    # A covariate model's future-known covariates: a long table (id, time, one column per future
    # covariate; the model's H steps after each series' last timestamp), a file, folder or URL.
    future: str | None = None


def published(repository: str, model: str, version: int | None) -> tuple[Path, Manifest]:
    """The version folder (the latest when `version` is None) and its manifest."""
    ref = read_model(Path(repository), model)
    if ref.error is not None:
        raise FileNotFoundError(ref.error)
    chosen = (
        ref.versions[-1] if version is None else next((v for v in ref.versions if v.version == version), None)
    )
    if chosen is None:
        known = ", ".join(str(v.version) for v in ref.versions)
        raise FileNotFoundError(f"model {model!r} has no version {version}; versions: {known}")
    return chosen.path, load_manifest(chosen.path / MANIFEST_FILE)


def channel_columns(names: Sequence[str], manifest: Manifest) -> list[str]:
    """The input's columns for the model's channels, in its order: their names, or `y` for one channel."""
    channels = list(manifest.channels)
    if all(c in names for c in channels):
        return channels
    if len(channels) == 1 and "y" in names:
        return ["y"]
    raise ValueError(f"model {manifest.name} reads channels {channels}; the table has columns {list(names)}")


def covariate_layout(manifest: Manifest) -> CovariateLayout | None:
    return manifest.panel.layout if manifest.panel is not None else None


def check_covariates(job: Job, manifest: Manifest) -> None:
    """What a covariate model needs that is checked before Ray starts: a future table exactly when the
    model reads future covariates, and in each of its parts the id, time and future covariate columns
    and no other (read from the parts' headers, not their rows). ValueError saying what is wrong."""
    layout = covariate_layout(manifest)
    future = list(layout.future) if layout is not None else []
    name = f"model {manifest.name!r} version {manifest.version}"
    if future and job.future is None:
        raise ValueError(
            f"{name} reads the future covariates {future}: give each series' values for the model's "
            f"{manifest.horizon} steps after its last timestamp in a table with --future "
            f"({job.id_col}, {job.time_col}, {', '.join(future)})"
        )
    if job.future is None:
        return
    if not future:
        raise ValueError(f"{name} reads no future covariates; --future {job.future} would not be read")
    parts = io.list_parts(job.future)
    want = [job.id_col, job.time_col, *future]
    for rel in parts.relative:
        columns = io.read_columns(parts.fs, parts.path(rel))
        where = f"future table {parts.path(rel)}"
        missing = [c for c in want if c not in columns]
        if missing:
            raise ValueError(f"{where} has no column {missing[0]!r}; {name} needs the columns {want}")
        extra = [c for c in columns if c not in want]
        if extra:
            raise ValueError(
                f"{where}: column {extra[0]!r} is not a future covariate of {name} (its future covariates: "
                f"{future}); the future table holds {want} only"
            )


class FutureRows:
    """The future table's rows of one input part's series. A folder of future parts that mirrors the
    input (a future part at the input part's relative path, any of the suffixes) gives that part's series
    from that future part alone; otherwise every future part is read for them. Either way a part is
    streamed a batch at a time and only the rows of the part's series are kept: memory holds S x H rows."""

    def __init__(
        self, uri: str, id_col: str, time_col: str, names: Sequence[str], zone: str | None = None
    ) -> None:
        self.parts = io.list_parts(uri)
        self.id_col, self.time_col, self.names, self.zone = id_col, time_col, list(names), zone
        self.by_name = {io.output_name(self.parts, r): r for r in self.parts.relative if r}

    def read(self, output_name: str, keys: pa.Array) -> pa.Table:
        """`future_frame` of the rows whose id is one of `keys` (strings)."""
        mirror = self.by_name.get(output_name)
        frames = []
        for rel in [mirror] if mirror is not None else self.parts.relative:
            # One future part's kept rows read as one table: a naive time's autumn repeat is read by each
            # series' row order, which a batch boundary would cut.
            kept = io.read_matching(self.parts.fs, self.parts.path(rel), self.id_col, keys)
            if kept:
                rows = pa.Table.from_batches(kept)
                frames.append(future_frame(rows, self.id_col, self.time_col, self.names, self.zone))
        return (
            pa.concat_tables(frames) if frames else future_frame(None, self.id_col, self.time_col, self.names)
        )


def future_frame(
    table: pa.Table | None, id_col: str, time_col: str, names: Sequence[str], zone: str | None = None
) -> pa.Table:
    """A future table (id, time, the future covariates, in any types pyarrow read) in one form: the id a
    string, the time UTC microseconds (a naive time is in `zone`, the model's, or UTC), the values float64;
    other columns dropped. Idempotent. ValueError naming a missing column or a null id or time."""
    types = [
        (id_col, pa.string()),
        (time_col, pa.timestamp("us", "UTC")),
        *((n, pa.float64()) for n in names),
    ]
    if table is None:
        return pa.table({c: pa.array([], t) for c, t in types})
    missing = [c for c, _ in types if c not in table.column_names]
    if missing:
        raise ValueError(f"the future table has no column {missing[0]!r}; it needs {[c for c, _ in types]}")
    for c in (id_col, time_col):
        if table[c].null_count:
            raise ValueError(f"the future table's column {c!r} has {table[c].null_count} nulls")
    ids = table[id_col]
    if pa.types.is_dictionary(ids.type):
        ids = pc.cast(ids, ids.type.value_type)
    micros = _utc_micros(table[time_col], zone, pc.cast(ids, pa.string()), time_col)
    stamps = pa.array(micros, pa.int64()).cast(pa.timestamp("us", "UTC"))
    data: dict[str, Any] = {id_col: pc.cast(ids, pa.string()), time_col: stamps}
    for n in names:
        data[n] = pc.cast(table[n], pa.float64())
    return pa.table(data)


def _utc_micros(
    column: pa.ChunkedArray,
    zone: str | None = None,
    ids: pa.ChunkedArray | None = None,
    name: str = "time",
) -> np.ndarray:
    """int64 microseconds since the epoch, UTC. A naive timestamp is in `zone`, the model's (UTC for a
    model without one), read by the trainer's rule (`rsa_core.wallclock.localize`): each series' rows
    (`ids`; None: one series) in table order, a wall-clock time the autumn change repeats in summer time
    the first time and in standard time once the clock has gone back. A time the spring change skips is
    refused (ValueError naming the series and its row), as the trainer refuses it."""
    if not pa.types.is_timestamp(column.type):
        column = pc.cast(column, pa.timestamp("us"))
    if column.type.tz is not None or zone is None:
        return pc.cast(column, pa.timestamp("us", column.type.tz)).to_numpy().view("int64")
    naive = pc.cast(column, pa.timestamp("us")).to_numpy(zero_copy_only=False)
    n = len(naive)
    if ids is None:
        order, starts = np.arange(n), np.r_[True, np.zeros(max(n - 1, 0), bool)][:n]
    else:
        # Each series' rows in table order, laid end to end (the trainer's grouping: export.data.panels).
        codes = pc.index_in(ids, value_set=pc.unique(ids)).to_numpy(zero_copy_only=False)
        order = np.argsort(codes, kind="stable")
        grouped = codes[order]
        starts = np.r_[True, grouped[1:] != grouped[:-1]][:n]
    local, skipped = localize(naive[order], zone, starts)
    if skipped.any():
        k = int(np.argmax(skipped))
        row = int(order[k])
        begin = int(np.flatnonzero(starts[: k + 1])[-1])
        series = "" if ids is None else f"series {ids[row].as_py()!r} "
        raise ValueError(
            f"{series}row {k - begin} (table row {row}), column {name!r}: {_shown_naive(naive[row])} does "
            f"not exist in {zone}: the clocks skip it (daylight saving)"
            + (f" (and {int(skipped.sum()) - 1} more rows)" if skipped.sum() > 1 else "")
        )
    out = np.empty(n, np.int64)
    out[order] = local.astype("datetime64[us]").view("int64")
    return out


def _shown_naive(stamp: np.datetime64) -> str:
    """A naive wall-clock time as ISO text."""
    return str(stamp.astype("datetime64[us]").item().isoformat())


def _changes(column: pa.ChunkedArray) -> np.ndarray:
    """Whether each row's value differs from the one before it, from the second row on (no nulls)."""
    n = len(column)
    return pc.not_equal(column.slice(1), column.slice(0, n - 1)).to_numpy(zero_copy_only=False)


def _sorted(table: pa.Table, id_col: str, time_col: str) -> bool:
    """Whether `table` is sorted by id, then time (ascending, as `sort_by` would put it)."""
    n = table.num_rows
    if n < 2:
        return True
    ids, stamps = table[id_col], table[time_col]
    later_id = pc.greater(ids.slice(1), ids.slice(0, n - 1))
    same_id = pc.equal(ids.slice(1), ids.slice(0, n - 1))
    later_time = pc.fill_null(pc.greater_equal(stamps.slice(1), stamps.slice(0, n - 1)), False)
    return bool(pc.all(pc.or_(later_id, pc.and_(same_id, later_time))).as_py())


class Forecaster:
    """One ONNX Runtime session of a published version, and the service's rules around it."""

    def __init__(self, job: Job, device: str = "cpu") -> None:
        from app.engine.providers import RuntimeOptions
        from app.engine.session import create_session

        self.job = job
        folder, self.manifest = published(job.repository, job.model, job.version)
        self.horizon = check_horizon(job.horizon, self.manifest)
        if job.levels:
            check_levels(self.manifest.intervals, job.levels)
        options = RuntimeOptions(device=device, intra_op_threads=job.threads)
        self.session = create_session(folder / MODEL_FILE, options)
        self.provider = self.session.get_providers()[0]

    def score_table(self, table: pa.Table, future: pa.Table | None = None) -> pa.Table:
        """Every series of `table` (long: id, time and channel columns; a covariate model's past
        covariates and statics as columns named as them) -> its forecast, long. `future`: a covariate
        model's future-known covariates (long: id, time, one column per future covariate; the model's H
        steps after each series' last timestamp; rows of other series are ignored)."""
        job, manifest, h = self.job, self.manifest, self.horizon
        L, columns = manifest.input_length, channel_columns(table.column_names, manifest)
        layout = covariate_layout(manifest)
        extra = [] if layout is None else [*layout.past, *(s.name for s in layout.static)]
        absent = [c for c in extra if c not in table.column_names]
        if absent:
            kind = "past" if layout is not None and absent[0] in layout.past else "static"
            raise ValueError(
                f"the table has no column {absent[0]!r}, a {kind} covariate of model {manifest.name!r}; "
                f"its columns are {table.column_names}"
            )
        if layout is not None and layout.future and future is None:
            raise ValueError(
                f"model {manifest.name!r} reads the future covariates {list(layout.future)}: no future table"
            )
        # Only the columns read, and sorted only when not sorted already: a part's table is the biggest
        # thing an actor holds, and a sorted copy doubled it.
        table = table.select([job.id_col, job.time_col, *columns, *extra])
        if pa.types.is_dictionary(table[job.id_col].type):  # compared and sorted by value
            plain = pc.cast(table[job.id_col], table[job.id_col].type.value_type)
            table = table.set_column(0, job.id_col, plain)
        if table[job.id_col].null_count:
            raise ValueError(f"column {job.id_col!r} has {table[job.id_col].null_count} null ids")
        # UTC before sorting: a naive time's autumn repeat is read by each series' row order, which a
        # sort by wall-clock time would undo.
        time_type = table[job.time_col].type
        tz = time_type.tz if pa.types.is_timestamp(time_type) else None  # the output's, as the input's
        micros = _utc_micros(table[job.time_col], manifest.timezone, table[job.id_col], job.time_col)
        utc_type = pa.timestamp("us", "UTC")
        i_time = table.column_names.index(job.time_col)
        table = table.set_column(i_time, job.time_col, pa.array(micros, pa.int64()).cast(utc_type))
        if not _sorted(table, job.id_col, job.time_col):
            table = table.sort_by([(job.id_col, "ascending"), (job.time_col, "ascending")])
        n = table.num_rows
        stamps = table[job.time_col].combine_chunks().cast(pa.int64()).to_numpy(zero_copy_only=False)
        values = np.column_stack(
            [table[c].to_numpy(zero_copy_only=False).astype(np.float64, copy=False) for c in columns]
        )
        # Series boundaries compared in Arrow: a column of Python strings, one per row, cost more memory
        # than the values.
        cuts = np.flatnonzero(_changes(table[job.id_col])) + 1 if n else np.empty(0, np.int64)
        begins = np.concatenate([[0], cuts]).astype(np.int64) if n else cuts
        ends = np.concatenate([cuts, [n]]).astype(np.int64) if n else cuts
        ids = table[job.id_col].take(pa.array(begins)).to_numpy(zero_copy_only=False)  # one per series
        self._refuse_repeats(stamps, begins, ends, ids)
        S = len(begins)
        windows = np.empty((S, L, len(columns)), np.float32)
        phases = np.empty(S, np.int64) if manifest.cycle is not None else None
        for i in range(S):
            b, e, sid = int(begins[i]), int(ends[i]), ids[i]
            where = f"series {sid!r}"

            def path_of(row: int, c: int, sid: Any = sid, b: int = b) -> str:
                return f"series {sid!r} row {row} ({columns[c]})"

            # Missing values (null, NaN) filled by the model's training rule up to the service's default
            # share, as a /v1 request's are (one definition: app.inference.windows).
            windows[i], _ = last_window_filled(
                values[b:e], manifest, e - b, MAX_MISSING_SHARE, where, path_of, str(sid)
            )
            if manifest.cycle is not None or manifest.calendar is not None:
                # The window's first row and the rows it spans; a global model's series shorter than L
                # has none before its own first row: /v1's reading of its `start` and length, which steps
                # back L - (e - b) of the model's steps (months for a calendar model) inside the service's
                # code. The time in the model's zone, as /v1 reads a start (`in_model_zone`).
                top, spans = (e - L, L) if e - b >= L else (b, e - b)
                first = datetime.fromtimestamp(int(stamps[top]) / 1e6, manifest.zone or UTC)
                if manifest.calendar is not None:
                    check_calendar_anchor(manifest, first, f"{where} timestamp")
                if phases is not None:
                    phase = window_phase_of(manifest, first, spans, f"{where} timestamp")
                    assert phase is not None
                    phases[i] = phase
        steps = h if layout is None else max(h, layout.horizon)
        horizon_us = self._steps_after(stamps[ends - 1], steps)  # [S, steps]
        rows = None
        if layout is not None:
            rows = self._covariates(layout, table, ids, begins, ends, horizon_us, future)
        forecast = np.empty((S, h, len(columns)), np.float32)
        for lo in range(0, S, job.batch_rows):
            part = slice(lo, lo + job.batch_rows)
            feed = build_feed(
                manifest,
                windows[part],
                None if phases is None else phases[part],
                None if rows is None else rows[part],
            )
            forecast[part] = self.session.run([FORECAST_OUTPUT], feed)[0][:, :h]
        bounds = level_bounds(manifest.intervals, forecast, job.levels, window=windows) if job.levels else {}
        arrays = [forecast, *(b for pair in bounds.values() for b in pair)]
        require_finite(arrays, lambda i: f"series {ids[i]!r}")
        return self._long(table, tz, ids, horizon_us[:, :h], forecast, bounds, columns)

    def _refuse_repeats(
        self, stamps: np.ndarray, begins: np.ndarray, ends: np.ndarray, ids: np.ndarray
    ) -> None:
        """ValueError naming the first series with two rows at one time (the rows sorted by id, then
        time), the time in the model's zone and the rows: its window would not be the model's steps. The
        trainer refuses a duplicate timestamp, and a /v1 series (a start and consecutive steps) cannot
        hold one."""
        if len(stamps) < 2:
            return
        same = np.diff(stamps) == 0
        if len(ends):
            same[ends[:-1] - 1] = False  # the last row of a series against the next one's first
        if not same.any():
            return
        row = int(np.argmax(same)) + 1
        i = int(np.searchsorted(ends, row, side="right"))
        when = (_EPOCH + timedelta(microseconds=int(stamps[row]))).astimezone(self.manifest.zone or UTC)
        more = int(same.sum()) - 1
        raise ValueError(
            f"series {ids[i]!r} has two rows at {when.isoformat()} (rows {row - int(begins[i]) - 1} and "
            f"{row - int(begins[i])} of the series sorted by time): a series holds each time once; drop "
            "or aggregate the duplicates" + (f" ({more} more duplicate rows in this part)" if more else "")
        )

    def _covariates(
        self,
        layout: CovariateLayout,
        table: pa.Table,
        ids: np.ndarray,
        begins: np.ndarray,
        ends: np.ndarray,
        horizon_us: np.ndarray,
        future: pa.Table | None,
    ) -> np.ndarray:
        """The `covariates` rows [S, D] of a part's series, by the service's own assembly and checks
        (`app.inference.covariates.covariate_rows`, as /v1 and OIP v2 build them): each series' past
        covariates from its last L rows of their columns (null: not observed), its statics from its
        rows (one value per series), its future ones from `future`'s rows at exactly the model's H
        steps after its last timestamp, its calendar from those steps. ValueError naming the series."""
        job, manifest, H, L = self.job, self.manifest, layout.horizon, layout.input_length
        S = len(ids)
        where = [f"series {sid!r}" for sid in ids]
        past = {p: pc.cast(table[p], pa.float64()).to_numpy(zero_copy_only=False) for p in layout.past}
        statics: dict[str, list[Any]] = {}
        for s in layout.static:
            column = table[s.name]
            firsts = column.take(pa.array(np.repeat(begins, ends - begins)))
            differs = pc.invert(pc.fill_null(pc.equal(column, firsts), False)).to_numpy(zero_copy_only=False)
            if differs.any():
                row = int(np.argmax(differs))
                i = int(np.searchsorted(ends, row, side="right"))
                raise ValueError(
                    f"{where[i]}: static covariate {s.name!r} must hold one value per series; its rows hold "
                    f"{column[int(begins[i])].as_py()!r} and {column[row].as_py()!r}"
                )
            statics[s.name] = column.take(pa.array(begins)).to_pylist()
        found: dict[str, tuple[int, int]] = {}
        if layout.future:
            assert future is not None
            future = future_frame(future, job.id_col, job.time_col, layout.future, manifest.timezone)
            future = future.sort_by([(job.id_col, "ascending"), (job.time_col, "ascending")])
            n = future.num_rows
            cuts = np.flatnonzero(_changes(future[job.id_col])) + 1 if n else np.empty(0, np.int64)
            starts = np.concatenate([[0], cuts]).astype(np.int64) if n else cuts
            stops = np.concatenate([cuts, [n]]).astype(np.int64) if n else cuts
            keys = future[job.id_col].take(pa.array(starts)).to_pylist()
            found = {k: (int(a), int(b)) for k, a, b in zip(keys, starts, stops, strict=True)}
            future_us = _utc_micros(future[job.time_col])
            values = {f: future[f].to_numpy(zero_copy_only=False) for f in layout.future}
        items = []
        for i in range(S):
            b, e = int(begins[i]), int(ends[i])
            k = min(e - b, L)  # the values the window reads, as /v1's series would send them
            futures = None
            if layout.future:
                futures = self._future_of(where[i], str(ids[i]), found, future_us, values, horizon_us[i, :H])
            items.append(
                SeriesCovariates(
                    field=where[i],
                    n_values=k,
                    future=futures,
                    past={p: past[p][e - k : e] for p in layout.past},
                    static={name: v[i] for name, v in statics.items()},
                    horizon_stamps=[_EPOCH + timedelta(microseconds=int(t)) for t in horizon_us[i, :H]],
                )
            )
        return covariate_rows(manifest, layout, items)

    def _future_of(
        self,
        where: str,
        key: str,
        found: dict[str, tuple[int, int]],
        stamps: np.ndarray,
        values: dict[str, np.ndarray],
        want: np.ndarray,
    ) -> dict[str, Any]:
        """One series' future values from the future table's rows, which must be at exactly `want`."""
        H, name = len(want), self.manifest.name
        a, b = found.get(key, (0, 0))
        span = f"{_shown(want[0])} .. {_shown(want[-1])}"
        match future_rows_problem(stamps[a:b], want):
            case None:
                return {f: v[a:b] for f, v in values.items()}
            case FutureProblem(kind="missing"):
                why = (
                    f"{where} has no rows in the future table (--future): model {name!r} needs its future "
                    f"covariates at the {H} steps after its last timestamp, from {_shown(want[0])}"
                )
            case FutureProblem(kind="count", rows=rows):
                why = (
                    f"{where} has {rows} rows in the future table (--future); model {name!r} needs exactly "
                    f"{H}, the steps {span}"
                )
            case FutureProblem(row=j):
                why = (
                    f"{where}: the future table's row {j} is at {_shown(stamps[a + j])}; model {name!r} "
                    f"needs the {H} steps after the series' last timestamp, {span}, so row {j} at "
                    f"{_shown(want[j])}"
                )
        raise ValueError(why)

    def _steps_after(self, last_us: np.ndarray, steps: int) -> np.ndarray:
        """[S, steps] int64 UTC microseconds of the steps after each series' last timestamp: last + k·step,
        or k calendar months on in the model's zone, by the one rule the service steps a forecast's
        timestamps with (`rsa_core.steps`)."""
        m = self.manifest
        last = np.asarray(last_us, np.int64).astype("datetime64[us]")
        after = steps_after(last, steps, m.frequency_seconds, m.calendar, m.zone)
        return after.astype(np.int64).reshape(len(last_us), steps)

    def _long(
        self,
        table: pa.Table,
        tz: str | None,
        series: np.ndarray,
        future_us: np.ndarray,
        forecast: np.ndarray,
        bounds: dict[float, tuple[np.ndarray, np.ndarray]],
        columns: list[str],
    ) -> pa.Table:
        """One row per series and step: id, timestamp, the forecast in a column named after the model
        (`forecast_columns`: `{model}`, or `{model}-{channel}` per channel of a wider one, as the client
        names it), `{column}-lo-{level}` and `{column}-hi-{level}` per level. `tz`: the input time column's
        zone (None: naive, shown as the model's wall clock)."""
        job, h = self.job, self.horizon
        S = len(series)
        future = future_us.reshape(-1)
        zone = self.manifest.timezone
        times = pa.array(future, pa.int64()).cast(pa.timestamp("us", tz or zone))
        if tz is None and zone is not None:  # naive in, naive out: the model's wall clock, as /v1 shows it
            times = pc.local_timestamp(times)
        data: dict[str, Any] = {
            job.id_col: pa.array(np.repeat(series, h), type=table[job.id_col].type),
            job.time_col: times,
        }
        for c, name in enumerate(forecast_columns(self.job.model, columns)):
            data[name] = forecast[:, :, c].reshape(-1)
            for level, (lo, hi) in bounds.items():
                data[f"{name}-lo-{level:g}"] = lo[:, :, c].reshape(-1)
                data[f"{name}-hi-{level:g}"] = hi[:, :, c].reshape(-1)
        out = pa.table(data)
        assert out.num_rows == S * h
        return out


def local_ray_auth() -> None:
    """A token of this process's own, in the environment, for a local Ray of ours (its raylet and workers
    inherit it), unless the caller chose a mode or a token: left to itself a local `ray.init()` turns token
    authentication on and writes the token to ~/.ray/auth_token, and leaves it there. Only the token is
    set: `ray.init` still turns the mode on itself, and refreshes its configuration, which a process that
    imported Ray earlier has read already. Set once per process: Ray's token loader keeps the first token
    it read."""
    if not any(k in os.environ for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


# A local Ray's one address. Ray swaps 127.0.0.1 for the machine's outward address (and so binds its
# servers on every interface) unless it runs as a machine of its own, which on Linux this switch of
# Ray's says (its default on macOS and Windows, read by `ray._private.services.get_node_ip_address`).
LOOPBACK = "127.0.0.1"
_LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def init_local_ray(**options: Any) -> None:
    """Start a local Ray of this process's own (`ray.init(address="local")`, `options` passed on) that
    listens on loopback only: its GCS, raylet, workers, agents and the autoscaler's metrics server on
    127.0.0.1, no dashboard, authenticated by a token of this process (`local_ray_auth`). Without this a
    local job's GCS, raylet and workers listened on every interface and the autoscaler's unauthenticated
    metrics server on 0.0.0.0:44217. A cluster (`ray.init(address=...)`) is the caller's explicit choice,
    and never goes through here."""
    import ray
    from ray._private import ray_constants

    local_ray_auth()
    saved = os.environ.get(_LOCAL_ONLY), ray_constants.ENABLE_RAY_CLUSTER
    # Ray's notice that it turned token authentication on (and how to opt out): on purpose here, with a
    # token of this process's own; a warning on every run of the batch command otherwise (issue 45).
    notice = logging.getLogger("ray._private.authentication.authentication_token_setup")
    notice_level = notice.level
    notice.setLevel(logging.ERROR)
    # The environment for Ray's processes started now (they inherit it), the flag for this one, which
    # read it when Ray was imported; both as they were afterwards, so a later `ray.init(address=...)` of
    # this process joins a cluster on its outward address as before.
    os.environ[_LOCAL_ONLY] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(
            # "local": a Ray of its own, never one already running on this machine (ray.init() alone
            # joins the newest `ray start` cluster it finds, whatever its token).
            address="local",
            _node_ip_address=LOOPBACK,
            include_dashboard=False,
            log_to_driver=False,
            **options,
        )
    finally:
        notice.setLevel(notice_level)
        if saved[0] is None:
            os.environ.pop(_LOCAL_ONLY, None)
        else:
            os.environ[_LOCAL_ONLY] = saved[0]
        ray_constants.ENABLE_RAY_CLUSTER = saved[1]


class InputRefused(ValueError):  # noqa: N818
    """A part the scorer refuses (a series too short, two rows at one time, a missing covariate ...): the
    same answer on every try, so it is never tried again; its actor hands the message back as data, and
    `run` raises it, naming the part (Ray would wrap it in its own exception and traceback)."""


def retrying(call: Callable[[], T], retries: int, what: str) -> T:
    """`call`, tried again up to `retries` times when it raises (each failure logged), but for
    InputRefused."""
    for attempt in range(retries + 1):
        try:
            return call()
        except InputRefused:
            raise
        except Exception as exc:
            if attempt == retries:
                raise
            logger.warning("%s failed (try %d of %d): %s", what, attempt + 1, retries + 1, exc)
    raise AssertionError("unreachable")


class PartScorer:
    """A Ray Data actor: one session, then one input part per call, read, scored and written."""

    def __init__(self, job: Job, input_uri: str, output_uri: str) -> None:
        import ray

        self.job = job
        self.parts = io.list_parts(input_uri)
        self.out_fs, self.out_root = io.open_fs(output_uri)
        self.forecaster = Forecaster(job, device="cuda" if ray.get_gpu_ids() else "cpu")
        layout = covariate_layout(self.forecaster.manifest)
        self.future = None
        if job.future is not None and layout is not None:
            zone = self.forecaster.manifest.timezone
            self.future = FutureRows(job.future, job.id_col, job.time_col, layout.future, zone)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import ray

        node = ray.get_runtime_context().get_node_id()
        done: dict[str, list[Any]] = {
            "part": [],
            "series": [],
            "seconds": [],
            "provider": [],
            "node": [],
            "refused": [],
        }
        for rel in batch["part"]:
            start = time.perf_counter()
            refused = ""
            try:
                series = retrying(partial(self._one, str(rel)), self.job.retries, f"part {rel!r}")
            except InputRefused as e:
                series, refused = 0, str(e)
            done["part"].append(str(rel))
            done["series"].append(series)
            done["refused"].append(refused)
            done["seconds"].append(time.perf_counter() - start)
            done["provider"].append(self.forecaster.provider)
            done["node"].append(node)
        return {k: np.asarray(v) for k, v in done.items()}

    def _one(self, rel: str) -> int:
        table = io.read_part(self.parts.fs, self.parts.path(rel))
        name = io.output_name(self.parts, rel)
        future = None
        try:
            if self.future is not None:  # only the rows of this part's series
                ids = table[self.job.id_col]
                if pa.types.is_dictionary(ids.type):
                    ids = pc.cast(ids, ids.type.value_type)
                future = self.future.read(name, pc.unique(pc.cast(ids, pa.string())))
            out = self.forecaster.score_table(table, future)
        except ValueError as e:  # the scorer's refusals: this input, whatever the try
            raise InputRefused(f"part {rel or self.parts.root!r}: {e}") from None
        io.write_part(self.out_fs, f"{self.out_root}/{name}", out)
        return out.num_rows // self.forecaster.horizon


class _QuietRayData(logging.Filter):
    """Ray Data during a batch job: its warnings and errors, not its executor's INFO lines (the execution
    plan, "execution finished in ...") nor its notice that progress bars are off (the job's own
    `Progress` reports), printed on every run (issue 45, item 12). A filter of the loggers that log them:
    Ray Data makes its handlers anew when a dataset runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING and not record.getMessage().startswith(
            "Progress bars disabled"
        )


_QUIETED = ("ray.data._internal.execution.streaming_executor", "ray.data._internal.progress")


@dataclass
class Summary:
    parts: int = 0
    skipped: int = 0
    series: int = 0
    seconds: float = 0.0
    providers: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)  # the Ray nodes whose actors scored parts


def run(
    job: Job,
    input_uri: str,
    output_uri: str,
    *,
    address: str | None = None,
    actors: int = 1,
    cpus_per_actor: float = 1.0,
    gpus_per_actor: float = 0.0,
    num_cpus: int | None = None,
    object_store_bytes: int | None = None,
    worker_niceness: int = 0,
    progress: Progress | None = None,
) -> Summary:
    """Score every input part whose output part is not there yet, on Ray Data: a local Ray by default
    (`num_cpus`, `object_store_bytes` bound it; its workers, the scoring actors among them, run at
    `worker_niceness`), the cluster at `address` otherwise (its own settings)."""
    import ray

    _, manifest = published(job.repository, job.model, job.version)
    check_covariates(job, manifest)  # a missing future table or column fails here, before Ray starts
    parts = io.list_parts(input_uri)
    out_fs, out_root = io.open_fs(output_uri)
    todo = [r for r in parts.relative if not io.finished(out_fs, f"{out_root}/{io.output_name(parts, r)}")]
    summary = Summary(parts=len(parts.relative), skipped=len(parts.relative) - len(todo))
    if not todo:
        return summary
    started_here = not ray.is_initialized()
    if started_here:
        if address is None:
            # Ray starts its workers at niceness 15 unless told otherwise: on a machine with other work the
            # scoring actor then waits for every other process (the 100,000-series run scored at 0.48x the
            # raw session's windows/s, which ran at 0, on cores shared with other jobs; docs/batch.md).
            init_local_ray(
                _system_config={"worker_niceness": worker_niceness},
                num_cpus=num_cpus,
                object_store_memory=object_store_bytes,
                configure_logging=False,
            )
        else:
            # A cluster on a loopback address (127.0.0.2: Ray swaps 127.0.0.1 for the machine's outward
            # address) is reached from this machine only, and the driver joins it on that address.
            host = address.rsplit(":", 1)[0]
            loopback: dict[str, Any] = {"_node_ip_address": host} if host.startswith("127.") else {}
            ray.init(address=address, log_to_driver=False, **loopback)
    start = time.perf_counter()
    quiet = _QuietRayData()
    for name in _QUIETED:
        logging.getLogger(name).addFilter(quiet)
    try:
        context = ray.data.DataContext.get_current()
        context.actor_task_retry_on_errors = True  # a part that failed in the actor is tried again
        # Parts are handed out once the whole pool is up (at most 10 minutes: a cluster without room for
        # the actors asked fails then), one at a time per actor, so every actor scores its share.
        context.wait_for_min_actors_s = 600
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        dataset = ray.data.from_items([{"part": r} for r in todo], override_num_blocks=len(todo))
        with warnings.catch_warnings():
            # Ray 2.60 (pinned, requirements/constraints.txt) names no parameter for an actor's restarts
            # and retries but `ray_remote_args`, which it warns will go in Ray 2.64; without them an actor
            # is restarted and its part tried again forever (Ray Data's default, -1).
            warnings.filterwarnings("ignore", message=r"`ray_remote_args` is deprecated")
            scored = dataset.map_batches(
                PartScorer,
                fn_constructor_kwargs={"job": job, "input_uri": input_uri, "output_uri": output_uri},
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=max(1, actors), max_tasks_in_flight_per_actor=1),
                num_cpus=cpus_per_actor,
                num_gpus=gpus_per_actor,
                max_restarts=2,  # an actor that died (a crash, a lost node) is restarted ...
                max_task_retries=2,  # ... and its part tried again
            )
        if progress is not None:
            progress.start(len(todo))
        # Each part's row as soon as it is written: `iter_rows` prefetches a block ahead, so it handed over
        # a part only once the next one was done too (a whole part late in the 100,000-series run).
        for batch in scored.iter_batches(batch_size=None, prefetch_batches=0, batch_format="numpy"):
            for refused in batch["refused"]:
                if refused:  # nothing more is scored: the job stops, non-zero, naming the part
                    raise InputRefused(str(refused))
            for series, provider, node in zip(batch["series"], batch["provider"], batch["node"], strict=True):
                summary.series += int(series)
                summary.providers.add(str(provider))
                summary.nodes.add(str(node))
                if progress is not None:
                    progress.update(int(series))
    finally:
        for name in _QUIETED:
            logging.getLogger(name).removeFilter(quiet)
        if started_here:
            ray.shutdown()
        if progress is not None:
            progress.close()
    summary.seconds = time.perf_counter() - start
    return summary
