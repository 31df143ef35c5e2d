"""Scoring one part: a published version's ONNX Runtime session and the service's rules around it.

`Forecaster.score_table` is the whole computation of one part, with the service's own code: the window
and its checks with missing values filled (`app.inference.windows.last_window_filled`), the phase
(`window_phase_of`), the calendar anchor, the graph's inputs (`app.artifacts.feed.build_feed`), the
session as the service creates it (`app.engine.session.create_session`), the intervals and their clipping
(`app.inference.intervals`), the finiteness check, and for a covariate model each series' covariate
row (`app.inference.covariates.covariate_rows`: past covariates and statics from the table's columns,
future ones from the future table, the calendar from the horizon's timestamps). For the same series run
in the same batch its numbers are the service's, bit for bit (tests/batch/test_score.py,
test_score_covariates.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from app.artifacts.contract import FORECAST_OUTPUT, MODEL_FILE, forecast_columns
from app.artifacts.covariates import CovariateLayout
from app.artifacts.feed import build_feed
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
from batch.job import Job, channel_columns, covariate_layout, published, table_covariates
from batch.reading import _EPOCH, _changes, _shown, _sorted, _utc_micros, future_frame
from rsa_core.frequency import Frequency, steps_ok
from rsa_core.future import FutureProblem, future_rows_problem
from rsa_core.steps import steps_after

# The share of a window's values that may be missing and be filled: the service's default
# (RSA_MAX_MISSING_SHARE).
MAX_MISSING_SHARE: float = Settings.model_fields["max_missing_share"].default
# The window rows whose steps `_refuse_gaps` judges at once: a few int64 arrays of them at a time (about
# 8 MB each), whatever the part's size.
_GAP_CHECK_ROWS = 1 << 20


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
        L, columns = manifest.input_length, channel_columns(table.column_names, manifest, job.target_col)
        layout = covariate_layout(manifest)
        extra = table_covariates(manifest)
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
        self._refuse_gaps(stamps, begins, ends, ids)
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

    def _refuse_gaps(self, stamps: np.ndarray, begins: np.ndarray, ends: np.ndarray, ids: np.ndarray) -> None:
        """ValueError naming the first series whose window (the rows the model reads: its last L) does not
        step by the model's frequency one row after the other (a missing row, a step back): the model reads
        them as consecutive steps, so such a window's values would sit a step off and its cycle out of
        phase (120 business days were forecast as if the weekends did not exist). The rule the service
        reads a request's timestamps by and the client checks a frame by (`rsa_core.frequency.steps_ok`:
        months on their anchor and days on the model's wall clock), in blocks of series, so that it holds
        a few arrays of a block's rows at a time, not of the part's."""
        m, L = self.manifest, self.manifest.input_length
        frequency = Frequency(m.frequency or "", m.frequency_seconds)
        block = max(1, _GAP_CHECK_ROWS // L)
        for lo in range(0, len(begins), block):
            b, e = begins[lo : lo + block], ends[lo : lo + block]
            top = np.maximum(b, e - L)
            lengths = e - top
            offsets = np.repeat(top - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
            rows = np.arange(int(lengths.sum())) + offsets  # each series' window rows, end to end
            if len(rows) < 2:
                continue
            us = stamps[rows].astype("datetime64[us]")
            times: Any = us
            if m.zone is not None:  # the model's wall clock, vectorised (pandas comes with Ray Data)
                import pandas as pd

                times = pd.DatetimeIndex(us).tz_localize("UTC").tz_convert(m.zone)
            series = np.repeat(np.arange(lo, lo + len(b)), lengths)
            bad = np.flatnonzero(~(steps_ok(times, frequency) | (series[1:] != series[:-1])))
            if not bad.size:
                continue
            k = int(bad[0]) + 1
            when, before = (
                (_EPOCH + timedelta(microseconds=int(stamps[rows[j]]))).astimezone(m.zone or UTC).isoformat()
                for j in (k, k - 1)
            )
            raise ValueError(
                f"series {ids[series[k]]!r}: the rows its window reads (its last {L}) must step by "
                f"{frequency.freq} one after the other, but {when} follows {before}: the model reads them "
                "as consecutive steps; insert a row with a null value for each missing step"
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
