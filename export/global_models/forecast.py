"""`python -m export.panel forecast`'s reading (export/global_models/cli.py is the command): the steps after
each series' last timestamp (`horizon`, by the one stepping rule of rsa_core.steps, as the service and the
batch scorer step them), and a covariate model's histories with their covariate rows (`with_covariates`: the
past and static covariates from the history file, the future ones from `--future-file`, checked against
those steps). Every problem is a typer.BadParameter naming the option, the file, the series and the
column."""

from __future__ import annotations

import dataclasses
from datetime import tzinfo
from pathlib import Path

import numpy as np
import typer

from export.covariates import CovariateSeries, series_covariate_rows
from export.data import ReadOptions
from export.global_models.model import GlobalModel
from rsa_core.calendar import calendar_step
from rsa_core.future import future_rows_problem
from rsa_core.steps import steps_after
from rsa_core.zones import model_zone

__all__ = ["horizon", "with_covariates"]


def horizon(
    stamps: np.ndarray, frequency: str, h: int, zone: str | None = None, model: str | None = None
) -> np.ndarray:
    """The h steps of `frequency` (the series' alias: `1h`, `1D`, `3MS`) after a series' last timestamp
    (UTC instants, datetime64[ns]), by the one stepping rule (`rsa_core.steps`), as the service and the
    batch scorer step them: days and months on the wall clock of `model`, the model's zone, shorter steps
    on the instants. A model without a zone (None) steps months on the wall clock of `zone`, the files'
    zone where they were read (UTC without one), and every fixed step on the instants."""
    import pandas as pd

    months = calendar_step(frequency)
    seconds = 0.0 if months is not None else pd.Timedelta(frequency).total_seconds()
    if model is not None:
        tz: tzinfo | None = model_zone(model)
    else:  # a UTC model, as before: months on the files' wall clock, fixed steps on the instants
        tz = None if zone is None or months is None else model_zone(zone)
    return steps_after(np.asarray(stamps[-1:], "datetime64[ns]"), h, seconds, months, tz)[0]


def with_covariates(
    fitted: GlobalModel,
    data: Path,
    future_file: Path | None,
    read: ReadOptions,
) -> tuple[list[CovariateSeries], str, np.ndarray]:
    """A covariate model's histories (past and static covariates from `data`'s columns, read as `read`
    says: `read_as_trained`), their frequency, and their `covariates` rows: the future covariates from
    `future_file`, which must hold exactly the H steps after each series' last timestamp; the calendar from
    those timestamps in the model's zone. The rows are the trainer's (series_covariate_rows on the history
    followed by the horizon). Every problem is a BadParameter naming the file, the series and the column."""
    covs = fitted.covariates
    assert covs is not None
    zone = read.timezone
    histories, frequency = _histories(fitted, data, read)
    future = _future_values(fitted, data, future_file, read, {s.id for s in histories})
    rows = []
    for s in histories:
        stamps = horizon(s.timestamps, frequency, fitted.config.horizon, zone, fitted.timezone)
        after = {} if future_file is None else _checked_future(future.get(s.id), s, stamps, future_file, zone)
        rows.append(_rows(fitted, s, stamps, after, data))
    return histories, frequency, np.concatenate(rows)


def _bad(message: str, option: str = "--future-file") -> typer.BadParameter:
    return typer.BadParameter(message, param_hint=option)


def _histories(fitted: GlobalModel, data: Path, read: ReadOptions) -> tuple[list[CovariateSeries], str]:
    """The history file's series with the past and static covariates the model reads (each a column
    by name: a missing one is named with the file's columns), the future covariates' columns unread."""
    from export.covariates import file_columns, load_covariate_panel, load_covariate_wide
    from export.data import DataError

    covs = fitted.covariates
    assert covs is not None
    statics = [s.name for s in covs.static]
    try:
        header = file_columns(data)
        absent = [n for n in (*covs.past, *statics) if n not in header]
        if absent:
            kind = "past" if absent[0] in covs.past else "static"
            raise DataError(
                f"{data.name} line 1, column {absent[0]!r}: missing; the model reads the {kind} covariate "
                f"{absent[0]!r} from the history file (past {list(covs.past)}, static {statics}); the "
                f"columns are {header}"
            )
        # The future covariates' past values, if the file has them (the training file does), are not read.
        unread = (*read.drop, *(n for n in covs.future if n in header))
        options = dataclasses.replace(read, drop=unread)
        if read.layout == "wide":  # one series, named after the file
            return load_covariate_wide(data, options, read.target_column, covs.past, ())
        return load_covariate_panel(data, options, covs.past, (), statics)[:2]
    except DataError as e:
        raise _bad(str(e), "--data") from None


def _future_values(
    fitted: GlobalModel, data: Path, future_file: Path | None, read: ReadOptions, known: set[str]
) -> dict[str, CovariateSeries]:
    """The future file's values by series (empty for a model without future covariates, which refuses
    one), its id and timestamp columns and dates read as `read` says; a series the history file does not
    hold is refused."""
    from export.covariates import load_future_values, load_future_wide
    from export.data import DataError

    covs = fitted.covariates
    assert covs is not None
    H = fitted.config.horizon
    if not covs.future:
        if future_file is not None:
            raise typer.BadParameter(
                "the model reads no future covariates (its calendar comes from the timestamps): it takes no "
                "future values",
                param_hint="--future-file",
            )
        return {}
    if future_file is None:
        raise _bad(
            f"the model reads the future covariates {list(covs.future)}: give their values for the "
            f"{H} steps after each series' last timestamp with --future-file (docs/panels.md)"
        )
    if H == 1:  # the long reader infers each file's step from a series' rows: one row tells none
        raise _bad(
            "a model of horizon 1: a future file holds one row per series, from which the long reader "
            "cannot tell the step; forecast it through the service (docs/panels.md, Covariates)"
        )
    try:
        if read.layout == "wide":  # the history's one series: a timestamp column and the future columns
            (series_id,) = known
            return load_future_wide(future_file, read, covs.future, series_id)
        how = ReadOptions(
            id_column=read.id_column,
            timestamp_column=read.timestamp_column,
            date_format=read.date_format,
            dayfirst=read.dayfirst,
            sort=read.sort,
            timezone=read.timezone,
        )
        future = load_future_values(future_file, how, covs.future)
    except DataError as e:
        raise _bad(str(e)) from None
    unknown = [k for k in future if k not in known]
    if unknown:
        raise _bad(
            f"{future_file.name} (series {unknown[0]!r}): no such series in {data.name}; the future "
            "values are those of the series forecast"
        )
    return future


def _checked_future(
    given: CovariateSeries | None, s: CovariateSeries, stamps: np.ndarray, future_file: Path, zone: str | None
) -> dict[str, np.ndarray]:
    """One series' future values, its rows checked against the H steps after its last timestamp
    (`stamps`; rsa_core.future's rule): none, too few or too many, or a row at another time is refused."""
    import pandas as pd

    def show(t: np.datetime64) -> str:  # in the zone the files were written in
        return str(pd.Timestamp(t).tz_localize("UTC").tz_convert(zone or "UTC"))

    H = len(stamps)
    problem = future_rows_problem(None if given is None else given.timestamps, stamps)
    if given is None or (problem is not None and problem.kind == "missing"):
        raise _bad(
            f"{future_file.name}: no rows for series {s.id!r}; it needs the {H} steps after the "
            f"series' last timestamp {show(s.timestamps[-1])}"
        )
    if problem is not None and problem.kind == "count":
        raise _bad(
            f"{future_file.name} (series {s.id!r}): {len(given)} rows; the model's horizon needs "
            f"{H}, the steps after the series' last timestamp {show(s.timestamps[-1])}"
        )
    if problem is not None:
        k = problem.row
        raise _bad(
            f"{future_file.name} (series {s.id!r}): row {k + 1} of the series is at "
            f"{show(given.timestamps[k])}; horizon step {k + 1} after its last timestamp "
            f"{show(s.timestamps[-1])} is {show(stamps[k])}"
        )
    return given.future


def _rows(
    fitted: GlobalModel, s: CovariateSeries, stamps: np.ndarray, after: dict[str, np.ndarray], data: Path
) -> np.ndarray:
    """The series' covariate rows: the trainer's (series_covariate_rows) on the history followed by the
    horizon's H steps (their future values `after`, the past ones unknown)."""
    covs = fitted.covariates
    assert covs is not None
    H, n = fitted.config.horizon, len(s)
    full = CovariateSeries(
        s.id,
        np.concatenate([s.values, np.full(H, np.nan)]),
        np.concatenate([s.timestamps, stamps]),
        past={p: np.concatenate([s.past[p], np.full(H, np.nan)]) for p in covs.past},
        future={f: np.concatenate([np.zeros(n), after[f]]) for f in covs.future},
        static=s.static,
    )
    try:
        return series_covariate_rows(full, covs, np.array([n]))
    except ValueError as e:  # a static value the model cannot encode (an unseen category)
        raise _bad(f"{data.name} (series {s.id!r}): {e}", "--data") from None
