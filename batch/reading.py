"""Reading the input's tables: timestamps as UTC microseconds with a naive time read in the model's zone by
the trainer's rule (`_utc_micros`, `rsa_core.wallclock.localize`), series boundaries and order in Arrow
(`_changes`, `_sorted`), and a covariate model's future table (`FutureRows`, `future_frame`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batch import io
from rsa_core.wallclock import localize
from rsa_core.written import first_problem, has_offsets, read_written

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _shown(us: int | np.integer[Any]) -> str:
    """UTC microseconds as an ISO time."""
    return (_EPOCH + timedelta(microseconds=int(us))).isoformat()


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
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
        # years (1981), 20150701 or R's decimal years (1991.5: July) as the client and the exporter read
        # them, not microseconds since 1970 as Arrow's cast would
        column = pc.cast(column, pa.string())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = _written(column, name)
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


def _written(column: pa.ChunkedArray, name: str) -> pa.ChunkedArray:
    """A text time column read as `python -m export.panel` reads a file's (rsa_core.written: the one format
    that reads the column, `Jan 2015`, `2015Q1`, `13/01/2015`...), naive; text with UTC offsets is left to
    Arrow's ISO 8601 cast, as before. A cell that does not read, or a day/month order the part leaves open,
    is a ValueError naming the row and the fix."""
    cells = np.array([("" if c is None else str(c).strip()) for c in column.to_pylist()], dtype=object)
    if has_offsets(cells):
        return column
    read = read_written(cells)
    problem = first_problem(cells, read, name)
    if problem is not None:
        fix = "" if problem.fixed else "; write the times as ISO 8601 (2015-02-01) or as a timestamp type"
        raise ValueError(f"row {problem.at}, column {name!r}: {problem.said}{fix}")
    return pa.chunked_array([pa.array(read.stamps.astype("datetime64[us]"), pa.timestamp("us"))])


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
