"""One global model over many series: the closed-form REM read-out over windows from every series.

Each window of L = k·period steps is divided by its own scale (the mean |value| of its last cycle), so
no parameter belongs to a series: the model forecasts series it never saw, of the same frequency. Its
features are the last rows of a fixed bank of REMs (export/bank.py's spec; the kernels of models/rem.py:
regular decays, damped cyclic harmonics of the period, same-phase dilated decays) applied to the
normalised window, the window's last `lags` values, and the share of the window that is missing. One
ridge regression (app/artifacts/readout.py, numpy: the service refits with it) maps them to the H
normalised future values; its normal equations are accumulated series by series, so memory does not
grow with the number of series.

Short histories: a window reaching back before a series' first value has that start masked (zeros that
the features see as missing, with the missing share as a feature), not filled with invented values.
Every series of at least `min_history` values is forecast; the model states that minimum.

The input length is searched in periods of the cycle (`INPUT_PERIODS`) on validation only: the last H
values of every training series are held out, the read-out fitted on the rest and scored by MASE there.

    python -m export.panel train --data stores_long.csv --horizon 12 --out runs/stores
    python -m export.panel forecast --model runs/stores/model.json --data new_stores.csv
    python -m export.panel forecast --model runs/shops/model.json --data shops.csv --future-file promo.csv
    python -m export.panel export --model runs/stores/model.json --name stores --repository model_repository

`export` publishes the model as an ONNX graph the service serves (export/global_models/onnx.py). Covariates
(`--future`, `--past`, `--static`, `--calendar`; export/covariates.py, docs/panels.md) add features to
the same ridge.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer

from app.artifacts.contract import forecast_columns
from app.artifacts.covariates import CovariateLayout
from app.inference.metrics import mape, mase, smape
from export.cli_options import ModelNameOption, RepositoryOption
from export.covariates import covariate_lines
from export.global_models.config import PanelConfig, default_bank, rem_kernels
from export.global_models.forecast import horizon as _horizon
from export.global_models.forecast import with_covariates
from export.global_models.model import SCHEMA_VERSION, GlobalModel, fit_global
from export.global_models.options import (
    CalendarOption,
    ColumnOption,
    DataOption,
    DateFormatOption,
    DayfirstOption,
    DropOption,
    EffectOption,
    EpochsOption,
    FillOption,
    FutureOption,
    HolidaysOption,
    HorizonOption,
    InputPeriodsOption,
    LayoutOption,
    LiftOption,
    LocalOption,
    MaxSecondsOption,
    NetworkOption,
    OutOption,
    PastOption,
    PeriodOption,
    ReadLayoutOption,
    SeedOption,
    SortOption,
    StartOption,
    StaticOption,
    TimezoneOption,
    Training,
    TrainOptions,
    WindowsPerEpochOption,
    read_as_trained,
    read_histories,
    read_training,
)
from export.global_models.search import (
    INPUT_PERIODS,
    seasonal_naive_score,
    summary_lines,
    train_global,
    training_record,
)
from rsa_core.frequency import parse_alias

if TYPE_CHECKING:  # the transformer is imported where the command line asks for it
    from export.global_models.transformer import Budget

__all__ = [
    "INPUT_PERIODS",
    "SCHEMA_VERSION",
    "GlobalModel",
    "PanelConfig",
    "default_bank",
    "fit_global",
    "mape",
    "mase",
    "rem_kernels",
    "seasonal_naive_score",
    "smape",
    "summary_lines",
    "train_global",
    "training_record",
]

# -- CLI -------------------------------------------------------------------------------------------

cli = typer.Typer(add_completion=False, help=__doc__.split("\n\n")[0])
ModelFileOption = Annotated[
    Path, typer.Option(help="a model.json written by train", exists=True, dir_okay=False, readable=True)
]


def _load_fitted(path: Path) -> GlobalModel:
    """The read-out saved at `path`; a file that is none (not JSON, or JSON of another kind) is a
    BadParameter on --model, not a traceback."""
    try:
        return GlobalModel.load(path)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise typer.BadParameter(
            f"{path}: not a model.json written by `python -m export.panel train` ({type(e).__name__}: {e})",
            param_hint="--model",
        ) from None


# The most steps a day the default cycle spans: a day of 15-minute steps (96). Finer steps get no cycle
# unless --period says it: one series of fpp3's 5-minute bank_calls (68k steps) trained in 28 s with
# none and in 10.4 min at a day's 288 steps (the input and window searches grow with the cycle); 2.5 min
# since a fit reads at most MAX_FIT_WINDOWS windows of a series (2026-12-07, app/artifacts/readout).
MAX_DAILY_STEPS = 96


def period_of(frequency: str) -> int:
    """The cycle of a frequency alias: monthly 12, quarterly 4, daily 7, weekly 52; a step shorter than a
    day that divides it, the day (hourly 24, half-hourly 48, 15-minute 96), up to MAX_DAILY_STEPS
    steps; else 1."""
    table = {"1MS": 12, "1ME": 12, "3MS": 4, "3ME": 4, "12MS": 1, "12ME": 1, "1D": 7, "7D": 52}
    if frequency in table:
        return table[frequency]
    steps = _steps_a_day(frequency)
    return steps if steps is not None and steps <= MAX_DAILY_STEPS else 1


def _steps_a_day(frequency: str) -> int | None:
    """How many steps of a fixed step shorter than a day make one, where they divide it exactly (the
    alias read by rsa_core.frequency's rule); None for a calendar step, a day or longer, or a remainder."""
    parsed = parse_alias(frequency)
    if parsed is None or parsed[0] or not 0 < parsed[1] < 86_400:
        return None
    steps = 86_400 / parsed[1]
    return int(steps) if steps.is_integer() else None


def _cycle_note(frequency: str, period: int, given: int | None) -> list[str]:
    """The line that says a sub-daily series got no cycle by default, and the --period that gives one."""
    steps = _steps_a_day(frequency)
    if given is not None or period > 1 or steps is None:
        return []
    return [
        f"  no cycle assumed for {frequency} steps (a day is {steps} of them, more than {MAX_DAILY_STEPS}): "
        f"--period {steps} trains on a daily cycle, at a higher cost"
    ]


def train_transformer(
    training: Training,
    cfg: PanelConfig,
    timezone: str | None,
    path: Path,
    budget: Budget,
    read: dict[str, Any] | None = None,
) -> list[str]:
    """`python -m export.panel train --network transformer`: train at L = `cfg.input_periods` periods, or
    at the input length the read-out's validation search picks on the same series (as
    bench/global_transformer.py does: one closed-form fit per length, where a transformer search would
    train once per length), save the model file at `path`; returns the lines saying what was done."""
    from export.global_models.transformer import train_panel_transformer
    from export.global_models.transformer_onnx import SavedTransformer, save_transformer

    series, frequency, plan = training.series, training.frequency, training.plan
    if cfg.input_periods is not None:
        length = cfg.input_periods * cfg.period if cfg.period > 1 else 4 * cfg.input_periods
        how = "given"
    else:
        length = train_global(series, cfg, frequency=frequency, plan=plan, report=False).input_length
        how = "the read-out's validation search"
    model = train_panel_transformer(series, cfg, length, budget=budget, plan=plan)
    model.read = read or {}  # how train read the file, as the read-out's model.json records it
    save_transformer(SavedTransformer(model, frequency, timezone), path)
    lines = [
        f"{training.count} series ({frequency}): RSA-Transformer, L = {length} ({how}), min history "
        f"{cfg.history}, {model.parameters} parameters, "
        f"best epoch {model.best_epoch} (validation MASE {model.val_mase:.4f}), stopped: {model.stopped}, "
        f"trained in {model.fit_seconds:.1f} s: {path}"
    ]
    return lines + covariate_lines(model.covariate_report)


@cli.command()
def train(
    data: DataOption,
    horizon: HorizonOption,
    out: OutOption = Path("runs/panel"),
    period: PeriodOption = None,
    input_periods: InputPeriodsOption = None,
    id_column: ColumnOption = None,
    timestamp_column: ColumnOption = None,
    target_column: ColumnOption = None,
    sort: SortOption = False,
    fill: FillOption = "none",
    date_format: DateFormatOption = None,
    dayfirst: DayfirstOption = None,
    drop: DropOption = "",
    timezone: TimezoneOption = None,
    future: FutureOption = "",
    past: PastOption = "",
    static: StaticOption = "",
    calendar: CalendarOption = "",
    holidays: HolidaysOption = None,
    layout: LayoutOption = "long",
    effect: EffectOption = "auto",
    local: LocalOption = True,
    lift: LiftOption = None,
    network: NetworkOption = "readout",
    epochs: EpochsOption = None,
    windows_per_epoch: WindowsPerEpochOption = None,
    max_seconds: MaxSecondsOption = None,
    seed: SeedOption = None,
    start: StartOption = None,
) -> None:
    """Train a global model on every series of a long file (with covariates: docs/panels.md)."""
    given = TrainOptions(**locals())
    from export.data import one_series_file

    checked = given.check()  # every option, before the data is read (export/global_models/options.py)
    one = layout == "long" and not static and one_series_file(data, checked.read)
    if one:  # a file of timestamps and values alone: one series, as the client reads a frame without ids
        given = dataclasses.replace(given, layout="wide")
        checked = given.check()
    training = read_training(given, checked)
    cfg = PanelConfig(
        horizon=horizon,
        period=period or period_of(training.frequency),
        input_periods=input_periods,
        lift=checked.lift,
    )
    # how the file was read, so that export and forecast read theirs alike (issue 45, item 9: --drop
    # repeated at export; the same for the layout, the columns, fill and date format)
    path, read = out / "model.json", checked.read.changed()
    try:
        if network == "transformer":
            lines = train_transformer(training, cfg, timezone, path, checked.budget, read)
        else:
            lines = _train_readout(training, cfg, timezone, path, local, read)
    except ValueError as e:  # too short for a window: said as an error, not a traceback
        raise typer.BadParameter(str(e), param_hint="--data") from None
    notes = [*(f"  {note}" for note in training.notes), *_cycle_note(training.frequency, cfg.period, period)]
    if one:
        notes.insert(
            0, f"  read as one series named {data.stem!r} (a timestamp and a value column: --layout wide)"
        )
    for line in [*lines[:1], *notes, *lines[1:]]:
        typer.echo(line)


def _train_readout(
    training: Training, cfg: PanelConfig, timezone: str | None, path: Path, local: bool, read: dict[str, Any]
) -> list[str]:
    """`train --network readout`: the search and the fit (export/global_models/search.py), the model file
    written at `path` with what it was trained on; returns the lines saying what was done."""
    plan = training.plan
    model = train_global(
        training.series, cfg, frequency=training.frequency, plan=plan, local=local and plan is None
    )
    model.timezone = timezone
    model.training = training_record(training.loaded)
    if read and model.training is not None:  # read back by `read_as_trained`
        model.training = {**model.training, "read": read}
    path = model.save(path)
    hybrid = (
        ""
        if model.local is None
        else f", averaged with {' and '.join(model.local.members)} on the last {model.local.length} values"
        + (f" ({model.local.long_note()})" if model.local.long_period is not None else "")
    )
    first = (
        f"{training.count} series ({training.frequency}), L = {model.input_length}, "
        f"min history {model.min_history}{hybrid}, fitted in {model.fit_seconds:.2f} s: {path}"
    )
    return [first, *summary_lines(model), *covariate_lines(model.covariate_report)]


@cli.command("export")
def export_command(
    model: ModelFileOption,
    name: ModelNameOption,
    repository: RepositoryOption = Path("my_models"),
    version: Annotated[int | None, typer.Option(help="the version to write (default: the next)")] = None,
    channel: Annotated[str, typer.Option(help="the name the service gives the forecast's one channel")] = "y",
    data: Annotated[
        Path | None,
        typer.Option(help="the long file it was trained on: calibrates prediction intervals (else none)"),
    ] = None,
    sort: Annotated[
        bool | None, typer.Option(help="sort the --data rows by series and time (default: as train did)")
    ] = None,
    timezone: Annotated[
        str | None, typer.Option(help="the zone --data's local times were written in (as at train)")
    ] = None,
    layout: ReadLayoutOption = None,
    drop: Annotated[
        str | None,
        typer.Option(help="--data's columns to leave out, comma-separated (default: those train left out)"),
    ] = None,
    nonnegative: Annotated[
        str,
        typer.Option(
            help="clip the intervals' lower bounds at 0: auto (where --data's series have no negative value "
            "and at least 5% zeros), none, or all (sales, counts, visitors: series that cannot go below 0)"
        ),
    ] = "auto",
) -> None:
    """Publish a global model (a read-out or a transformer, as train wrote it) as an ONNX graph into a
    model repository (checked against the Python model), with intervals pooled across the series of
    `--data`."""
    from export.data import DataError
    from export.global_models.transformer_onnx import is_transformer_file
    from export.publish import VersionExistsError

    if nonnegative not in ("auto", "none", "all"):  # refused with or without --data
        raise typer.BadParameter(f"use auto, none or all, got {nonnegative!r}", param_hint="--nonnegative")
    if is_transformer_file(model):
        import logging

        from export.global_models.transformer_onnx import export_transformer, load_transformer

        logging.getLogger("torch").setLevel(logging.ERROR)  # the exporter's notes on absent torchvision ops

        saved = load_transformer(model)
        net = saved.model
        intervals, said = None, "no intervals (give --data, the training file, to calibrate them)"
        note = None
        if data is not None:
            from export.global_models.transformer import calibrate_transformer

            try:
                zone = timezone or saved.timezone
                read = read_as_trained({"read": net.read}, timezone=zone, sort=sort, drop=drop, layout=layout)
                series = _training_series(data, net.covariates, read)
                intervals, said = calibrate_transformer(net, series)
                intervals, note = _with_nonnegative(intervals, nonnegative, series)
            except DataError as e:
                raise typer.BadParameter(str(e), param_hint="--data") from None
            except ValueError as e:  # not the series it was trained on
                raise typer.BadParameter(str(e), param_hint="--data") from None
        try:
            folder = export_transformer(saved, repository, name, version, channel, intervals)
        except (ValueError, VersionExistsError) as e:
            raise typer.BadParameter(str(e)) from None
        L, H = net.input_length, net.config.horizon
        typer.echo(
            f"{name} version {folder.name} (global transformer): L = {L}, H = {H}, min history "
            f"{net.config.history}, {said}: {folder}"
        )
        _echo_coverage(intervals, note)
        _echo_serving(repository)
        return
    from export.global_models.onnx import calibrate_global, export_global

    fitted = _load_fitted(model)
    intervals, said = None, "no intervals (give --data, the training file, to calibrate them)"
    note = None
    if data is not None:
        read = read_as_trained(
            fitted.training, timezone=timezone or fitted.timezone, sort=sort, drop=drop, layout=layout
        )
        try:
            series = _training_series(data, fitted.covariates, read)
        except DataError as e:
            raise typer.BadParameter(str(e), param_hint="--data") from None
        intervals, said = calibrate_global(fitted, series)
        intervals, note = _with_nonnegative(intervals, nonnegative, series)
    try:
        folder = export_global(fitted, repository, name, version, channel, intervals)
    except (ValueError, VersionExistsError) as e:
        raise typer.BadParameter(str(e)) from None
    typer.echo(
        f"{name} version {folder.name}: L = {fitted.input_length}, H = {fitted.config.horizon}, "
        f"min history {fitted.min_history}, {said}: {folder}"
    )
    _echo_coverage(intervals, note)
    _echo_serving(repository)


def _with_nonnegative(
    intervals: dict[str, Any] | None, setting: str, series: Sequence[Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """`intervals` with its `nonnegative` flag (the service clips a flagged target's bounds at 0 on every
    path: app/inference/intervals.py), decided on the calibration series by export/nonnegative.py's rule,
    and the line that says so (or, for series that never go below 0 undetected, how to declare them)."""
    from export.nonnegative import never_negative, panel_nonnegative

    values = [np.asarray(getattr(v, "values", v), dtype=np.float64) for v in series]
    try:
        flag, how = panel_nonnegative(setting, values)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--nonnegative") from None
    if intervals is None:
        return None, None
    note = None
    if flag:
        note = f"lower bounds clipped at 0 ({how})"
    elif setting == "auto" and all(never_negative(v) for v in values):
        note = "hint: no series goes below 0; --nonnegative all clips the intervals' lower bounds at 0"
    return {**intervals, "nonnegative": [flag]}, note


def _echo_serving(repository: Path) -> None:
    """The exact command that serves `repository`: scripts/serve.sh polls it (RSA_MODEL_CONTROL=poll), so a
    service it started serves a new version without a restart."""
    typer.echo(
        f"  served by: RSA_MODEL_REPOSITORY={shlex.quote(str(repository))} bash scripts/serve.sh (it polls "
        "the repository every RSA_POLL_S seconds: a running one serves this version without a restart)"
    )


def _training_series(data: Path, covs: CovariateLayout | None, read: Any) -> list[Any]:
    """The training file's series as train read them (`read`, an export.data.ReadOptions from
    `read_as_trained`: long or wide): values alone, or (a covariate model) with the covariates by name,
    the calendar in the model's zone."""
    if covs is None:
        return [s.values for s in read_histories(data, read)[0]]
    from export.covariates import load_covariate_panel, load_covariate_wide

    options = dataclasses.replace(read, timezone=covs.timezone)
    statics = [s.name for s in covs.static]
    if read.layout == "wide":
        return load_covariate_wide(data, options, read.target_column, covs.past, covs.future)[0]
    return load_covariate_panel(data, options, covs.past, covs.future, statics)[0]


def _echo_coverage(intervals: dict[str, Any] | None, note: str | None = None) -> None:
    if note is not None:
        typer.echo(f"  {note}")
    if intervals is not None:
        from export.reports import IntervalCalibration, from_dict

        for group in from_dict(IntervalCalibration, intervals["calibration"]).coverage:
            shares = ", ".join(f"{level}%: {share:.3f}" for level, share in group.coverage.items())
            typer.echo(f"  coverage out of fold, {group.group} ({group.series} series): {shares}")


@cli.command()
def forecast(
    model: ModelFileOption,
    data: Annotated[
        Path,
        typer.Option(
            help="a long file of histories (any series, seen or not); a covariate model's past and static "
            "covariates are its columns, by name"
        ),
    ],
    out: Annotated[Path | None, typer.Option(help="CSV to write (default: print)")] = None,
    sort: Annotated[
        bool | None, typer.Option(help="sort the --data rows by series and time (default: as train did)")
    ] = None,
    timezone: Annotated[
        str | None, typer.Option(help="the zone --data's local times were written in (forecasts: UTC)")
    ] = None,
    drop: Annotated[
        str | None,
        typer.Option(help="columns of --data to leave out, comma-separated (default: those train left out)"),
    ] = None,
    layout: ReadLayoutOption = None,
    future_file: Annotated[
        Path | None,
        typer.Option(
            help="a covariate model's future values (as NeuralForecast's futr_df, TimeGPT's X_df): a long "
            "CSV or Parquet file, id, timestamp and one column per future covariate, the H steps after "
            "each series' last timestamp"
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            help="the forecast column's name, the model's (default: the folder of --model, as export --name "
            "usually names it); the client and the batch command name theirs after the served model"
        ),
    ] = None,
) -> None:
    """Forecast every series of a long file (series never seen in training included): the file's own id
    and timestamp columns (`unique_id` for a wide file's one series) and the forecast in a column named
    after the model (NeuralForecast's and TimeGPT's rule), as the client and the batch command write
    theirs."""
    import pandas as pd

    from export.covariates import file_columns
    from export.data import DataError, key_columns
    from export.global_models.transformer_onnx import is_transformer_file

    if is_transformer_file(model):
        raise typer.BadParameter(
            "a global transformer is forecast through the service: export it (docs/panels.md)",
            param_hint="--model",
        )
    fitted = _load_fitted(model)
    zone = timezone or fitted.timezone
    if fitted.covariates is None and future_file is not None:
        raise typer.BadParameter(
            "the model reads no covariates: it takes no future values", param_hint="--future-file"
        )
    # the histories read as train read its file: the same columns, date format and fill (its record)
    read = read_as_trained(fitted.training, timezone=zone, sort=sort, drop=drop, layout=layout)
    histories: Sequence[Any]  # PanelSeries, or a (wide or covariate) CovariateSeries
    rows: np.ndarray | None = None
    if fitted.covariates is None:
        try:
            histories, frequency = read_histories(data, read)
        except DataError as e:
            raise typer.BadParameter(str(e), param_hint="--data") from None
    else:
        histories, frequency, rows = with_covariates(fitted, data, future_file, read)
    try:
        values = fitted.forecast([s.values for s in histories], covariates=rows)
    except ValueError as e:  # shorter than min_history
        raise typer.BadParameter(str(e), param_hint="--data") from None
    table = []
    for i, f in enumerate(values):
        s: Any = histories[i]
        table += [
            (s.id, t, float(v))
            for t, v in zip(_horizon(s.timestamps, frequency, len(f), zone, fitted.timezone), f, strict=True)
        ]
    column = forecast_columns(name or model.resolve().parent.name, ["y"])[0]
    frame = pd.DataFrame(table, columns=[*key_columns(file_columns(data), read), column])
    if out is None:
        typer.echo(frame.to_csv(index=False), nl=False)
    else:
        frame.to_csv(out, index=False)
        typer.echo(f"{len(histories)} series forecast: {out}")


if __name__ == "__main__":
    cli()
