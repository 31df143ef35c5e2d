"""A request's covariates -> the `covariates` graph input of a global model (app/artifacts/covariates.py's
layout), validated with the field named: an unknown or missing covariate, a wrong length, a static value
of the wrong type or an unseen category is the client's mistake (InvalidInput, 422/400), never a 500.

Protocol-neutral: /v1 hands each series' `future`, `past` and `static` objects, OIP v2 its named tensors
turned into the same mappings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from app.artifacts.covariates import CovariateLayout
from app.artifacts.manifest import Manifest
from app.core.errors import InvalidInput, check_names

__all__ = [
    "HistoryCovariates",
    "HistoryRows",
    "SeriesCovariates",
    "covariate_rows",
    "history_covariate_rows",
    "history_rows",
    "refuse_covariates",
    "unsent_future_steps",
]


@dataclass(frozen=True)
class SeriesCovariates:
    """One series' covariates as sent: `future` {name: H values}, `past` {name: one value per value
    sent}, `static` {name: value}; `field` the series' place in the request (e.g. series[2])."""

    field: str
    n_values: int
    future: Mapping[str, Sequence[float] | np.ndarray] | None = None
    past: Mapping[str, Sequence[float | None] | np.ndarray] | None = None
    static: Mapping[str, Any] | None = None
    horizon_stamps: Sequence[datetime] | None = None  # the model's H horizon steps (for its calendar)


@dataclass(frozen=True)
class HistoryCovariates:
    """One series' covariates over its whole history, for a backtest or an anomaly check (statsforecast's
    `cross_validation(df)` with exogenous columns): `past` and `future` {name: one value per value of the
    history}, `future` also the values after it that the last window's forecast reads (`reach` in
    `history_covariate_rows`), `static` {name: value}."""

    field: str
    n_values: int
    future: Mapping[str, Sequence[float]] | None = None
    past: Mapping[str, Sequence[float | None]] | None = None
    static: Mapping[str, Any] | None = None


def refuse_covariates(manifest: Manifest, item: SeriesCovariates | HistoryCovariates) -> None:
    """A model without covariates refuses a series that sends some (silently ignoring them would forecast
    without what the client believes it used)."""
    for kind in ("future", "past", "static"):
        if getattr(item, kind):
            raise InvalidInput(
                f"{item.field}.{kind}: model {manifest.name} takes no covariates",
                field=f"{item.field}.{kind}",
            )


def _names(
    given: Mapping[str, Any] | None, want: Sequence[str], where: str, kind: str, model: str
) -> Mapping[str, Any]:
    given = given or {}
    check_names(
        given,
        want,
        f"{where}.{kind}",
        lambda name: (
            f"{where}.{kind}.{name}: model {model} has no {kind} covariate {name!r}; "
            f"its {kind} covariates are {list(want)}"
        ),
        lambda name: (
            f"{where}.{kind}.{name}: missing; model {model} needs the {kind} covariates {list(want)}"
        ),
    )
    return given


def _column(
    values: Sequence[Any] | np.ndarray, n: int, field: str, what: str, allow_null: bool
) -> np.ndarray:
    if len(values) != n:
        raise InvalidInput(f"{field} has {len(values)} values; it needs {n} ({what})", field=field, limit=n)
    if isinstance(values, np.ndarray):  # the /v1 fast lane's arrays: no null in them
        out = values.astype(np.float64, copy=False)
    else:
        out = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    bad = ~np.isfinite(out) if not allow_null else np.isinf(out)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidInput(f"{field}[{i}]: a covariate value must be a finite number", field=f"{field}[{i}]")
    return out


def covariate_rows(
    manifest: Manifest,
    layout: CovariateLayout,
    items: Sequence[SeriesCovariates],
    open_future: bool = False,
) -> np.ndarray:
    """The raw `covariates` rows [S, D] of the request's series. `open_future`: the future values may
    hold NaN (a backtest's or anomaly check's steps past the history that were not sent: read as the
    training mean, as the graph reads a short series' missing past)."""
    L, H = layout.input_length, layout.horizon
    past = np.full((len(items), L, len(layout.past)), np.nan)
    future = np.zeros((len(items), H, len(layout.future)))
    static = np.zeros((len(items), layout.static_width))
    stamps = np.zeros((len(items), H), dtype="datetime64[us]")
    for i, item in enumerate(items):
        where = item.field
        given = _names(item.future, layout.future, where, "future", manifest.name)
        for j, name in enumerate(layout.future):
            f = f"{where}.future.{name}"
            what = f"one per step of the model's horizon {H}"
            future[i, :, j] = _column(given[name], H, f, what, open_future)
        given = _names(item.past, layout.past, where, "past", manifest.name)
        for j, name in enumerate(layout.past):
            f = f"{where}.past.{name}"
            # null: not observed, read as the training mean, like a short series' missing start
            column = _column(given[name], item.n_values, f, "one per value of the series", True)[-L:]
            past[i, L - len(column) :, j] = column
        given = _names(item.static, [s.name for s in layout.static], where, "static", manifest.name)
        for s in layout.static:
            f = f"{where}.static.{s.name}"
            try:
                static[i, _offset(layout, s.name) : _offset(layout, s.name) + s.width] = s.encode(
                    given[s.name]
                )
            except ValueError as e:
                raise InvalidInput(
                    f"{f}: {e}", field=f, limit=None if s.categories is None else list(s.categories)
                ) from None
        if layout.calendar:
            if item.horizon_stamps is None:
                raise InvalidInput(
                    f"{where}.start: required, the model derives calendar covariates {list(layout.calendar)} "
                    "from the forecast's timestamps",
                    field=f"{where}.start",
                )
            stamps[i] = [_utc(t) for t in item.horizon_stamps]
    return layout.assemble(past, future, stamps if layout.calendar else None, static)


def history_covariate_rows(
    manifest: Manifest,
    layout: CovariateLayout,
    item: HistoryCovariates,
    cutoffs: Sequence[int],
    reach: int,
    horizon_stamps: Sequence[Sequence[datetime] | None],
) -> np.ndarray:
    """The raw `covariates` rows [len(cutoffs), D] of the windows before each cutoff: the past values
    before it and the future values of the model's H steps from it, cut from the whole-history columns
    and laid out by `covariate_rows`, as a forecast of that window alone lays them out. A future column
    holds one value per value of the history, then up to `reach` (H − the steps the answer reads) more:
    the last windows' H steps run that far past the history's end, but the answer reads none of those
    steps, so the ones not sent are read as the training mean (NaN in the row, as a short series'
    missing past; `unsent_future_steps` counts them per window) and sending them makes the forecast the
    one `/forecast` gives with them. `horizon_stamps`: each cutoff's H horizon steps (for the calendar;
    None without a `start`)."""
    where, n, H = item.field, item.n_values, layout.horizon
    want = "one per value of the series"
    future = {
        name: _future_column(values, n, reach, H, f"{where}.future.{name}")
        for name, values in _names(item.future, layout.future, where, "future", manifest.name).items()
    }
    past = {
        name: _column(values, n, f"{where}.past.{name}", want, True)
        for name, values in _names(item.past, layout.past, where, "past", manifest.name).items()
    }
    windows = [
        SeriesCovariates(
            field=where,
            n_values=t,
            future={name: column[t : t + H] for name, column in future.items()},
            past={name: column[:t] for name, column in past.items()},
            static=item.static,
            horizon_stamps=stamps,
        )
        for t, stamps in zip(cutoffs, horizon_stamps, strict=True)
    ]
    return covariate_rows(manifest, layout, windows, open_future=True)


def _future_column(
    values: Sequence[Any],
    n: int,
    reach: int,
    horizon: int,
    field: str,
    what: str = "one per value of the series",
) -> np.ndarray:
    """A history's future covariate: n values (`what`: one per value of the series), or up to `reach`
    more (the steps past them the last windows' H steps read), padded with NaN to n + reach."""
    m = len(values)
    if not n <= m <= n + reach:
        after = (
            f", then optionally up to the {reach} after it that the last window's {horizon} steps read "
            "(read as the training mean where not sent; the answer reads none of them)"
            if reach
            else ""
        )
        raise InvalidInput(
            f"{field} has {m} values; it needs {n} ({what}{after})",
            field=field,
            limit=n if m < n else n + reach,
        )
    out = np.full(n + reach, np.nan)
    out[:m] = _column(values, m, field, "one per value of the series", False)
    return out


@dataclass(frozen=True)
class HistoryRows:
    """A request's covariates over each series' whole history, checked once (`history_rows`), from which
    any window's raw `covariates` row is cut, laid out as a forecast of that window alone lays it out
    (`covariate_rows`): what a refit of a covariate model reads (app/artifacts/readout.py's
    `CovariateRows(layout, rows)`). Plain arrays, so it pickles to the fit's worker process."""

    layout: CovariateLayout
    past: tuple[np.ndarray, ...]  # per series [n, P], NaN where not observed
    future: tuple[np.ndarray, ...]  # per series [n + reach, F], NaN where not sent (the training mean)
    static: tuple[np.ndarray, ...]  # per series [S], encoded
    stamps: tuple[np.ndarray | None, ...]  # per series [n + H] datetime64[us] UTC (the calendar's)

    def rows(self, i: int, ends: np.ndarray) -> np.ndarray:
        """Series i's raw rows [len(ends), D] of the windows whose input ends at each of `ends`: the past
        values before the end (NaN before the series' start), the future values and the calendar of the
        H steps from it (NaN past what was sent)."""
        layout, e = self.layout, np.asarray(ends, dtype=np.int64)
        L, H = layout.input_length, layout.horizon
        steps = e[:, None] + np.arange(H)[None, :]  # [n, H]
        past = None
        if layout.past:
            padded = np.concatenate([np.full((L, len(layout.past)), np.nan), self.past[i]])
            past = padded[e[:, None] + np.arange(L)[None, :]]  # padded[e : e + L] = past[e − L : e]
        future = None
        if layout.future:
            column = self.future[i]
            reach = int(steps.max()) + 1 - len(column) if len(e) else 0
            if reach > 0:  # past what was sent: the training mean
                column = np.concatenate([column, np.full((reach, column.shape[1]), np.nan)])
            future = column[steps]
        stamps = None
        if layout.calendar:
            at = self.stamps[i]
            assert at is not None  # history_rows requires a start for a calendar model
            stamps = at[steps]
        static = np.repeat(self.static[i][None, :], len(e), axis=0)
        return layout.assemble(past, future, stamps, static)

    def from_row(self, first: Sequence[int]) -> HistoryRows:
        """The covariates of each series i from its row `first[i]` on: a history's, cut where its values
        begin (`windows.not_started`), as a history sent from there would carry them."""
        return HistoryRows(
            self.layout,
            tuple(p[b:] for p, b in zip(self.past, first, strict=True)),
            tuple(f[b:] for f, b in zip(self.future, first, strict=True)),
            self.static,
            tuple(None if t is None else t[b:] for t, b in zip(self.stamps, first, strict=True)),
        )


def history_rows(
    manifest: Manifest,
    layout: CovariateLayout,
    items: Sequence[HistoryCovariates],
    reach: int,
    stamps: Sequence[Sequence[datetime] | None],
    future_what: str = "one per value of the series",
    future_extra: int = 0,
) -> HistoryRows:
    """The request's covariates checked (each error an InvalidInput naming the field, as
    `covariate_rows`'s) and kept whole: past one value per value, future `n + future_extra` values
    (`future_what`) and up to `reach` more, statics encoded; `stamps[i]`: the times of series i's values
    and the H steps after them (None without a `start`, refused for a calendar model)."""
    past, future, static, times = [], [], [], []
    for item, when in zip(items, stamps, strict=True):
        where, n = item.field, item.n_values
        given = _names(item.future, layout.future, where, "future", manifest.name)
        future.append(
            np.stack(
                [
                    _future_column(
                        given[name],
                        n + future_extra,
                        reach,
                        layout.horizon,
                        f"{where}.future.{name}",
                        future_what,
                    )
                    for name in layout.future
                ],
                axis=1,
            )
            if layout.future
            else np.zeros((n, 0))
        )
        given = _names(item.past, layout.past, where, "past", manifest.name)
        past.append(
            np.stack(
                [
                    _column(given[name], n, f"{where}.past.{name}", "one per value of the series", True)
                    for name in layout.past
                ],
                axis=1,
            )
            if layout.past
            else np.zeros((n, 0))
        )
        given = _names(item.static, [s.name for s in layout.static], where, "static", manifest.name)
        encoded = []
        for s in layout.static:
            f = f"{where}.static.{s.name}"
            try:
                encoded.append(s.encode(given[s.name]))
            except ValueError as e:
                raise InvalidInput(
                    f"{f}: {e}", field=f, limit=None if s.categories is None else list(s.categories)
                ) from None
        static.append(np.concatenate(encoded) if encoded else np.zeros(0))
        if layout.calendar and when is None:
            raise InvalidInput(
                f"{where}.start: required, the model derives calendar covariates {list(layout.calendar)} "
                "from the timestamps",
                field=f"{where}.start",
            )
        times.append(
            None
            if not layout.calendar or when is None
            else np.array([_utc(t) for t in when], "datetime64[us]")
        )
    return HistoryRows(layout, tuple(past), tuple(future), tuple(static), tuple(times))


def unsent_future_steps(item: HistoryCovariates, cutoffs: Sequence[int], horizon: int) -> list[int]:
    """Per cutoff, the future covariate steps its window reads (the model's `horizon` H from it) that lie
    past the values sent (`history_covariate_rows` reads them as the training mean); 0 for a model or a
    series without future covariates."""
    sent = min((len(v) for v in (item.future or {}).values()), default=None)
    if sent is None:
        return [0] * len(cutoffs)
    return [max(0, t + horizon - sent) for t in cutoffs]


def _offset(layout: CovariateLayout, name: str) -> int:
    at = 0
    for s in layout.static:
        if s.name == name:
            return at
        at += s.width
    raise KeyError(name)


def _utc(t: datetime) -> np.datetime64:
    """An instant as naive UTC datetime64 (a naive datetime is UTC, as the service reads it)."""
    if t.tzinfo is not None:
        t = t.astimezone(UTC).replace(tzinfo=None)
    return np.datetime64(t, "us")
