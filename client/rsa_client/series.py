"""What a request sends of each series besides its values' window: a /v1 series item with its covariates
(`_History`, `_histories`: backtests, anomaly checks, fits) and a covariate model's OIP v2 tensors
(`_covariate_tensors`), with the future table (`X_df`) checked by the one rule
(`rsa_core.future.future_rows_problem`), all before any request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rsa_client.frames import _aware, _check_steps, _future, _model_frequency, _ordered, _zone, warn_user
from rsa_client.models import ModelSpec
from rsa_core.future import future_rows_problem
from rsa_core.windows import right_aligned as _right_aligned


def unread_columns(
    df: pd.DataFrame, columns: list[str], id_col: str, time_col: str, spec: ModelSpec | None
) -> None:
    """The one rule of a frame's other columns, on every call: a column that is neither the id, the time,
    the model's channels (`columns`) nor one of its covariates (`spec`'s; None: none) is not read, and
    said in one UserWarning (an R data set's `rownames`; a covariate the model was not trained with), as
    NeuralForecast leaves undeclared columns unread. Before, `cross_validation` and `detect_anomalies`
    refused such a frame and `forecast` ignored the column without a word."""
    covariates = [c["name"] for c in spec.covariates if c["kind"] != "calendar"] if spec is not None else []
    unread = [c for c in df.columns if c not in (id_col, time_col, *columns, *covariates)]
    if unread:
        has = f"its covariates are {covariates}" if covariates else "it reads no covariates"
        warn_user(
            f"columns {unread} are not read: neither the model's channels {columns} nor its covariates "
            f"({has})"
        )


@dataclass(frozen=True)
class _History:
    """One series of a long frame: its id, values [n, C] (NaN: missing) and timestamps [n]; a covariate
    model's past covariates [n] (NaN: not observed), future ones [n + its rows of X_df], statics."""

    id: Any
    values: np.ndarray
    stamps: np.ndarray  # datetime64[ns] (UTC)
    past: dict[str, np.ndarray] = field(default_factory=dict)
    future: dict[str, np.ndarray] = field(default_factory=dict)
    static: dict[str, Any] = field(default_factory=dict)

    def body(
        self, begin: int = 0, end: int | None = None, reach: int = 0, values: np.ndarray | None = None
    ) -> dict[str, Any]:
        """/v1's `series` item for rows begin .. end − 1: values (null: missing; `values` in place of the
        series' own, an earlier check's repaired ones) and their start, and the covariates over those
        rows (the future ones `reach` rows further: what the last window's forecast reads past them)."""
        stop = len(self.values) if end is None else end
        rows = (self.values if values is None else values)[begin:stop]
        sent = [[None if v != v else v for v in row] for row in rows.tolist()]
        start = pd.Timestamp(self.stamps[begin]).tz_localize("UTC").isoformat()
        item_id = None if self.id is None else str(self.id)
        item: dict[str, Any] = {"id": item_id, "values": sent, "start": start}
        if self.past:
            item["past"] = {
                k: [None if v != v else v for v in col[begin:stop].tolist()] for k, col in self.past.items()
            }
        if self.future:
            item["future"] = {}
            for k, col in self.future.items():
                # Up to `reach` values past the rows (X_df's); the service reads those not sent as
                # the training mean.
                item["future"][k] = col[begin : min(stop + reach, len(col))].tolist()
        if self.static:
            item["static"] = dict(self.static)
        return item


def _histories(
    df: pd.DataFrame,
    columns: list[str],
    id_col: str,
    time_col: str,
    spec: ModelSpec | None = None,
    x_df: pd.DataFrame | None = None,
    reach: int = 0,
) -> list[_History]:
    """The frame's series with their covariates (every column beside the id, the time and the channels is
    one); a covariate model's future values past each history, the `reach` steps the last window's
    forecast reads, come from `x_df`, checked as a forecast's X_df is: all before any request."""
    # the covariates a request sends: the calendar is derived from the timestamps
    kinds = (
        {c["name"]: c["kind"] for c in spec.covariates if c["kind"] != "calendar"} if spec is not None else {}
    )
    if spec is not None:
        unread_columns(df, columns, id_col, time_col, spec)
        absent = [c for c in kinds if c not in df.columns]
        if absent:
            raise ValueError(f"model {spec.name} reads covariates {list(kinds)}; the frame lacks {absent}")
    futures = [c for c, kind in kinds.items() if kind == "future"]
    if x_df is not None and not (futures and reach):
        why = "reads no future covariates" if not futures else "reads no future value past the history here"
        raise ValueError(f"model {spec.name if spec else ''} {why}; X_df would not be read")
    # Without X_df, the `reach` future steps past each history (which the answer does not show) are
    # read by the service as the training mean (issue 45 item 4; the answer's `future_unsent`).
    frame, times = _ordered(df, id_col, time_col, spec.timezone if spec is not None else None)
    out = []
    values = frame[columns].to_numpy(np.float64)
    ids = frame[id_col].to_numpy()
    if spec is not None:  # every row is sent, as consecutive steps from the series' start
        _check_steps(ids, _aware(frame[time_col], spec.timezone, ids), _model_frequency(spec))
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    begins, ends = np.concatenate([[0], cuts]).astype(int), np.concatenate([cuts, [len(ids)]]).astype(int)
    after: dict[str, np.ndarray] = {}
    if x_df is not None and spec is not None:
        last = times[ends - 1].astype("datetime64[s]").astype(np.int64)
        after = _future_rows(spec, x_df, ids[begins], last, reach, id_col, time_col)
    for i, (a, b) in enumerate(zip(begins, ends, strict=True)):
        rows = frame.iloc[a:b]
        past, future, static = {}, {}, {}
        for name, kind in kinds.items():
            if kind == "past":
                past[name] = rows[name].to_numpy(np.float64)
            elif kind == "future":
                later = after[name][i].astype(np.float64) if name in after else np.zeros(0)
                future[name] = np.concatenate([rows[name].to_numpy(np.float64), later])
            else:
                seen = pd.unique(rows[name])
                if len(seen) != 1 or pd.isna(seen[0]):
                    raise ValueError(
                        f"series {ids[a]!r}: static covariate {name!r} must have one value per series; "
                        f"it holds {list(seen)[:3]}"
                    )
                value = seen[0]
                static[name] = value.item() if isinstance(value, np.generic) else value
        out.append(_History(ids[a], values[a:b], times[a:b], past, future, static))
    return out


def _covariate_tensors(
    spec: ModelSpec,
    frame: pd.DataFrame,
    X_df: pd.DataFrame | None,  # noqa: N803
    series_ids: np.ndarray,
    begins: np.ndarray,
    ends: np.ndarray,
    last: np.ndarray,
    id_col: str,
    time_col: str,
) -> list[tuple[str, str, np.ndarray]]:
    """A covariate model's named OIP v2 inputs for every series (frame sorted by id and time): `past_{name}`
    FP32 [S, L] (each series' last L rows of the column, NaN: not observed), `future_{name}` FP32 [S, H]
    (from X_df, at exactly the model's H steps after each series' last row), `static_{name}` FP32 [S] or
    INT64 [S] (the category's index). ValueError naming the series and the column, before any request."""
    past, future = spec.covariate_names("past"), spec.covariate_names("future")
    statics = [c for c in spec.covariates if c["kind"] == "static"]
    if not spec.covariates:
        if X_df is not None:
            raise ValueError(f"model {spec.name} v{spec.version} takes no covariates; X_df would not be read")
        return []
    listed = ", ".join(f"{c['name']} ({c['kind']})" for c in spec.covariates)
    for name in [*past, *(c["name"] for c in statics)]:
        if name not in frame.columns:
            raise ValueError(
                f"df has no column {name!r}: model {spec.name} v{spec.version} reads the covariates "
                f"{listed}; past ones and statics are columns of df, future ones X_df's"
            )
    L, H = spec.input_length, spec.horizon
    out: list[tuple[str, str, np.ndarray]] = []
    for name in past:
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(np.float64)
        # NaN before a short series' start: not observed (the service reads only its `lengths` last)
        out.append((f"past_{name}", "FP32", _right_aligned(values, begins, ends, L, np.nan)))
    for c in statics:
        column = frame[c["name"]].to_numpy()
        firsts = column[begins]
        # frame is sorted by id, so its groups come in the order of `begins`
        held = frame.groupby(id_col, sort=False)[c["name"]].nunique(dropna=False).to_numpy()
        bad = np.flatnonzero((held != 1) | pd.isna(firsts))
        if len(bad):
            i = int(bad[0])
            values = list(pd.unique(column[begins[i] : ends[i]]))[:3]
            raise ValueError(
                f"series {series_ids[i]!r}: static covariate {c['name']!r} must hold one value per "
                f"series, it holds {values}"
            )
        if c["categories"] is None:
            out.append((f"static_{c['name']}", "FP32", firsts.astype(np.float32)))
            continue
        categories = [str(v) for v in c["categories"]]
        index = []
        for i, v in enumerate(firsts):
            if str(v) not in categories:
                raise ValueError(
                    f"series {series_ids[i]!r}: static covariate {c['name']!r} is {v!r}, not one of the "
                    f"model's training categories {categories}"
                )
            index.append(categories.index(str(v)))
        out.append((f"static_{c['name']}", "INT64", np.array(index, "<i8")))
    if not future:
        if X_df is not None:
            raise ValueError(
                f"model {spec.name} v{spec.version} reads no future covariates; X_df would not be read"
            )
        return out
    if X_df is None:
        raise ValueError(
            f"model {spec.name} v{spec.version} reads the future covariates {future}: give X_df "
            f"({id_col}, {time_col}, {', '.join(future)}; the model's {H} steps after each series' last row)"
        )
    arrays = _future_rows(spec, X_df, series_ids, last, H, id_col, time_col)
    out += [(f"future_{f}", "FP32", arrays[f]) for f in future]
    return out


def _future_rows(
    spec: ModelSpec,
    X_df: pd.DataFrame,  # noqa: N803
    series_ids: np.ndarray,
    last: np.ndarray,
    n: int,
    id_col: str,
    time_col: str,
) -> dict[str, np.ndarray]:
    """X_df's future covariates {name: [S, n] float32}: every series' rows at exactly the n steps after
    its last row (`last`, Unix seconds), every value a number, no other column and no series df lacks;
    ValueError naming the series and the column, before any request (forecast's X_df and a backtest's)."""
    future = spec.covariate_names("future")
    absent = [c for c in (id_col, time_col, *future) if c not in X_df.columns]
    if absent:
        raise ValueError(f"X_df has no column {absent[0]!r}; it needs {[id_col, time_col, *future]}")

    unknown = [c for c in X_df.columns if c not in (id_col, time_col, *future)]
    if unknown:
        raise ValueError(
            f"X_df's column {unknown[0]!r} is not a future covariate of model {spec.name} (its future "
            f"covariates: {future})"
        )
    xf, times = _ordered(X_df, id_col, time_col, spec.timezone)
    groups = {k: np.asarray(v) for k, v in xf.groupby(id_col, sort=False).indices.items()}
    known = set(series_ids.tolist())
    stray = [k for k in groups if k not in known]
    if stray:
        raise ValueError(f"X_df holds series that df does not: {stray[:5]}")
    want = _future(spec, last, n, _zone(spec))
    arrays = {f: np.empty((len(series_ids), n), np.float32) for f in future}
    values = {f: pd.to_numeric(xf[f], errors="coerce").to_numpy(np.float64) for f in future}
    for i, sid in enumerate(series_ids):
        at = groups.get(sid)
        span = f"{pd.Timestamp(want[i, 0])} .. {pd.Timestamp(want[i, -1])}"
        problem = future_rows_problem(None if at is None else times[at], want[i])
        if problem is not None and problem.kind != "row":
            raise ValueError(
                f"series {sid!r} has {problem.rows} rows in X_df; model {spec.name} needs "
                f"its future covariates {future} at exactly the {n} steps after its last row, {span}"
            )
        if problem is not None:
            j = problem.row
            raise ValueError(
                f"series {sid!r}: X_df's row {j} is at {pd.Timestamp(times[at][j])}; model {spec.name} needs "
                f"the {n} steps after the series' last row, {span}"
            )
        for f in future:
            got = values[f][at]
            if not np.isfinite(got).all():
                j = int(np.argmax(~np.isfinite(got)))
                raise ValueError(
                    f"series {sid!r}: X_df's {f!r} at {pd.Timestamp(times[at][j])} is not a number"
                )
            arrays[f][i] = got
    return arrays
