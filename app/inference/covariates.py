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
from app.core.errors import InvalidInput

__all__ = [
    "HistoryCovariates",
    "SeriesCovariates",
    "covariate_rows",
    "history_covariate_rows",
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
    unknown = [n for n in given if n not in want]
    if unknown:
        raise InvalidInput(
            f"{where}.{kind}.{unknown[0]}: model {model} has no {kind} covariate {unknown[0]!r}; "
            f"its {kind} covariates are {list(want)}",
            field=f"{where}.{kind}.{unknown[0]}",
            limit=list(want),
        )
    missing = [n for n in want if n not in given]
    if missing:
        raise InvalidInput(
            f"{where}.{kind}.{missing[0]}: missing; model {model} needs the {kind} covariates {list(want)}",
            field=f"{where}.{kind}.{missing[0]}",
            limit=list(want),
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


def _future_column(values: Sequence[Any], n: int, reach: int, horizon: int, field: str) -> np.ndarray:
    """A history's future covariate: n values (one per value of the series), or up to `reach` more (the
    steps past the history the last windows' H steps read), padded with NaN to n + reach."""
    m = len(values)
    if not n <= m <= n + reach:
        after = (
            f", then optionally up to the {reach} after it that the last window's {horizon} steps read "
            "(read as the training mean where not sent; the answer reads none of them)"
            if reach
            else ""
        )
        raise InvalidInput(
            f"{field} has {m} values; it needs {n} (one per value of the series{after})",
            field=field,
            limit=n if m < n else n + reach,
        )
    out = np.full(n + reach, np.nan)
    out[:m] = _column(values, m, field, "one per value of the series", False)
    return out


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
