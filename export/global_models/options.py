"""`python -m export.panel train`'s options: each declared once (its help, as `--help` prints it), checked
together before any data is read (`TrainOptions.check`), and the training file read as they say
(`read_training`: a long file, a long file with covariates, or a wide one). Every bad option is a
`typer.BadParameter` naming it; the search and the writing are export/global_models/cli.py's."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from export.covariates import CovariatePlan, CovariateSeries

__all__ = [
    "Checked",
    "TrainOptions",
    "Training",
    "names",
    "read_as_trained",
    "read_histories",
    "read_training",
]

DataOption = Annotated[Path, typer.Option(help="a long file (CSV or Parquet): id, timestamp, target")]
HorizonOption = Annotated[int, typer.Option(help="steps to forecast")]
OutOption = Annotated[Path, typer.Option(help="folder for model.json")]
PeriodOption = Annotated[
    int | None,
    typer.Option(
        help="the cycle in steps (default: from the frequency: 12 monthly, 4 quarterly, 7 daily, 52 weekly, "
        "a day of steps from 12 hours to 15 minutes)"
    ),
]
InputPeriodsOption = Annotated[int | None, typer.Option(help="L in periods (default: searched)")]
ColumnOption = Annotated[str | None, typer.Option()]
SortOption = Annotated[bool, typer.Option(help="sort rows by series and time")]
FillOption = Annotated[str, typer.Option(help="none, linear, ffill or zero")]
DateFormatOption = Annotated[
    str | None, typer.Option(help="strftime format of the timestamps, e.g. '%d/%m/%Y' (default: detected)")
]
DayfirstOption = Annotated[
    bool | None,
    typer.Option(
        "--dayfirst/--monthfirst", help="the day/month order where the dates leave it open (01/02/2015)"
    ),
]
DropOption = Annotated[str, typer.Option(help="columns to leave out, comma-separated")]
TimezoneOption = Annotated[
    str | None, typer.Option(help="IANA zone of timestamps without offset (the calendar's zone)")
]
FutureOption = Annotated[str, typer.Option(help="future-known covariate columns, comma-separated")]
PastOption = Annotated[str, typer.Option(help="past-only covariate columns, comma-separated")]
StaticOption = Annotated[str, typer.Option(help="static (per-series) covariate columns, comma-separated")]
CalendarOption = Annotated[
    str, typer.Option(help="calendar features of each horizon step: hour,dayofweek,month,holiday")
]
HolidaysOption = Annotated[
    str | None, typer.Option(help="country code of the 'holiday' calendar feature (holidays package)")
]
LayoutOption = Annotated[
    str,
    typer.Option(help="long (id, timestamp, target), or wide: one series, a column each (covariates)"),
]
# export's and forecast's --layout: None reads --data as train read its file (model.json's training.read)
ReadLayoutOption = Annotated[
    str | None, typer.Option(help="--data is long, or wide (one series) (default: as train read its file)")
]
EffectOption = Annotated[
    str,
    typer.Option(
        help="how covariates move the forecast: relative to each window's level (promotions), additive "
        "in the target's units (temperature), both (the read-out weighs each), or auto: relative or "
        "both, whichever validates better"
    ),
]
LocalOption = Annotated[
    bool,
    typer.Option(
        help="the hybrid (the default without covariates): the read-out averaged with Theta and the "
        "damped trend fitted per series at forecast time (export/global_models/hybrid.py); --no-local: "
        "the read-out alone"
    ),
]
# The widest random layer `--lift` takes: its outputs are features of every window the fit keeps (at 4,096
# and M3 monthly's 54 features, about 75 times the plain read-out's columns).
MAX_LIFT = 4096
LiftOption = Annotated[
    str | None,
    typer.Option(
        help="the read-out's random layer (a fixed ReLU layer over its features, read by the ridge beside "
        "them; docs/panels.md): auto (512 or none, chosen on validation; the default for a read-out "
        "without covariates, none elsewhere), 0 (none) or a width"
    ),
]
NetworkOption = Annotated[
    str,
    typer.Option(
        help="readout: the closed-form REM read-out; transformer: the global RSA-Transformer, trained by "
        "gradient within the budget below (export/global_models/transformer.py; docs/panels.md)"
    ),
]
EpochsOption = Annotated[int | None, typer.Option(help="transformer: at most this many epochs (20)")]
WindowsPerEpochOption = Annotated[
    int | None, typer.Option(help="transformer: windows drawn per epoch (4096)")
]
MaxSecondsOption = Annotated[
    float | None, typer.Option(help="transformer: the cap on a training's seconds (240)")
]
SeedOption = Annotated[int | None, typer.Option(help="transformer: the seed of its start and batches (0)")]
StartOption = Annotated[
    str | None,
    typer.Option(
        help="transformer: least_squares (the default: the linear path at its ridge solution, attention "
        "from 0) or random (PyTorch's initialisation)"
    ),
]


def names(text: str) -> list[str]:
    """A comma-separated option's names, blanks left out."""
    return [n.strip() for n in text.split(",") if n.strip()]


@dataclasses.dataclass(frozen=True)
class Checked:
    """The options checked: how to read the file, the covariates by kind, the calendar features, and
    the transformer's budget (None for the read-out)."""

    read: Any  # export.data.ReadOptions
    kinds: dict[str, list[str]]  # future, past, static
    calendar: list[str]
    budget: Any  # export.global_models.transformer.Budget, or None
    lift: int | None  # PanelConfig.lift: 0 none, a width, None chosen on validation


@dataclasses.dataclass(frozen=True)
class Training:
    """The training file as read: the series fitted on (values, or CovariateSeries), what was loaded (for
    the training record), their frequency, the covariate plan (None without covariates), the count, and
    the long reader's notes (rows sorted, steps filled, rows before a series began left out)."""

    series: list[np.ndarray] | list[CovariateSeries]
    loaded: Sequence[Any]
    frequency: str
    plan: CovariatePlan | None
    count: int
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """`train`'s options as given (the command's parameters, by name)."""

    data: Path
    horizon: int
    out: Path
    period: int | None
    input_periods: int | None
    id_column: str | None
    timestamp_column: str | None
    target_column: str | None
    sort: bool
    fill: str
    date_format: str | None
    dayfirst: bool | None
    drop: str
    timezone: str | None
    future: str
    past: str
    static: str
    calendar: str
    holidays: str | None
    layout: str
    effect: str
    local: bool
    lift: str | None
    network: str
    epochs: int | None
    windows_per_epoch: int | None
    max_seconds: float | None
    seed: int | None
    start: str | None

    def check(self) -> Checked:
        """Every option checked before the data is read; a bad one is a BadParameter naming it."""
        from app.artifacts.covariates import EFFECTS
        from export.data import DataError, ReadOptions

        try:
            options = ReadOptions(
                id_column=self.id_column,
                timestamp_column=self.timestamp_column,
                target_column=self.target_column,
                sort=self.sort,
                fill=self.fill,
                date_format=self.date_format,
                dayfirst=self.dayfirst,
                timezone=self.timezone,
                drop=tuple(names(self.drop)),
                # recorded (model.json's training.read) so that export and forecast read a wide file as wide
                layout="wide" if self.layout == "wide" else "auto",
            )
        except DataError as e:  # a zone name that is none
            raise typer.BadParameter(str(e), param_hint="--timezone") from None
        kinds = {"future": names(self.future), "past": names(self.past), "static": names(self.static)}
        cal = names(self.calendar)
        if self.holidays and "holiday" not in cal:
            cal.append("holiday")
        if self.effect not in (*EFFECTS, "auto"):
            raise typer.BadParameter(
                f"must be one of {[*EFFECTS, 'auto']}, got {self.effect!r}", param_hint="--effect"
            )
        if self.layout not in ("long", "wide"):
            raise typer.BadParameter(f"must be long or wide, got {self.layout!r}", param_hint="--layout")
        if self.network not in ("readout", "transformer"):
            raise typer.BadParameter(
                f"must be readout or transformer, got {self.network!r}", param_hint="--network"
            )
        budget = self._budget()
        if self.layout == "wide" and kinds["static"]:
            raise typer.BadParameter(
                "a wide file is one series: it has no static covariates", param_hint="--static"
            )
        if self.layout == "wide" and self.id_column is not None:
            raise typer.BadParameter(
                "a wide file is one series, named after the file: it has no id column (leave --id-column "
                "out, or read the file as long)",
                param_hint="--id-column",
            )
        return Checked(options, kinds, cal, budget, self._lift(bool(any(kinds.values()) or cal)))

    def _lift(self, covariates: bool) -> int | None:
        """PanelConfig.lift from --lift: not given, auto where a random layer applies (a read-out without
        covariates) and none elsewhere; auto: None, chosen on validation; a width. A layer asked for where
        none applies (covariates, the transformer) is refused."""
        applies = self.network == "readout" and not covariates
        if self.lift is None:
            return None if applies else 0
        text = self.lift.strip().lower()
        if text != "auto" and not text.isdigit():
            raise typer.BadParameter(
                f"must be auto, 0 or a positive width, got {self.lift!r}", param_hint="--lift"
            )
        if text != "auto" and int(text) > MAX_LIFT:
            raise typer.BadParameter(
                f"the widest random layer is {MAX_LIFT} outputs (its features are kept per training window), "
                f"got {int(text)}",
                param_hint="--lift",
            )
        if (text == "auto" or int(text) > 0) and not applies:
            raise typer.BadParameter(
                "the random layer reads the target's features alone: a read-out without covariates has it "
                "(leave --lift out)",
                param_hint="--lift",
            )
        return None if text == "auto" else int(text)

    def _budget(self) -> Any:
        """The transformer's Budget from its options (None for the read-out, which refuses them)."""
        budget_options: dict[str, Any] = {  # Budget's fields by option (int, float or str; None: not given)
            "--epochs": self.epochs,
            "--windows-per-epoch": self.windows_per_epoch,
            "--max-seconds": self.max_seconds,
            "--seed": self.seed,
            "--start": self.start,
        }
        given = [k for k, v in budget_options.items() if v is not None]
        if self.network == "readout" and given:  # said, never ignored
            raise typer.BadParameter(
                "a training budget is the transformer's: the read-out is fitted in closed form (add "
                "--network transformer)",
                param_hint=given[0],
            )
        if self.network == "transformer" and self.effect not in ("auto", "relative"):
            raise typer.BadParameter(
                "the transformer reads covariates relative to each window's scale (its input is scaled): "
                "leave --effect out",
                param_hint="--effect",
            )
        if self.network != "transformer":
            return None
        from export.global_models.transformer import Budget

        try:  # refused before the data is read
            return Budget(
                **{k.lstrip("-").replace("-", "_"): v for k, v in budget_options.items() if v is not None}
            )
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint=given[0] if given else None) from None


def read_training(given: TrainOptions, checked: Checked) -> Training:
    """The training file read as the options say; a file the reader refuses is a BadParameter on --data,
    a calendar feature or holiday country the model cannot derive one on --calendar."""
    from export.covariates import load_covariate_panel, load_covariate_wide
    from export.data import DataError, load_panel

    kinds, cal = checked.kinds, checked.calendar
    holidays, timezone, effect = given.holidays, given.timezone, given.effect
    try:
        if given.layout == "wide":
            one, frequency = load_covariate_wide(
                given.data, checked.read, given.target_column, kinds["past"], kinds["future"]
            )
            if not (kinds["past"] or kinds["future"] or cal):
                return Training([one[0].values], one, frequency, None, 1)
            plan = CovariatePlan.fit(one, kinds["past"], kinds["future"], cal, (), holidays, timezone, effect)
            return Training(one, one, frequency, plan, 1)
        if any(kinds.values()) or cal:
            series, frequency, notes = load_covariate_panel(
                given.data, checked.read, kinds["past"], kinds["future"], kinds["static"]
            )
            plan = CovariatePlan.fit(
                series, kinds["past"], kinds["future"], cal, kinds["static"], holidays, timezone, effect
            )
            return Training(series, series, frequency, plan, len(series), notes)
        panel = load_panel(given.data, checked.read)
        values = [s.values for s in panel.series]
        return Training(values, panel.series, panel.frequency, None, len(panel), panel.notes)
    except DataError as e:
        raise typer.BadParameter(str(e), param_hint="--data") from None
    except ValueError as e:  # a calendar feature or holiday country the model cannot derive
        raise typer.BadParameter(str(e), param_hint="--calendar") from None


def read_as_trained(
    training: Mapping[str, Any] | None,
    *,
    timezone: str | None,
    sort: bool | None = None,
    drop: str | None = None,
    layout: str | None = None,
) -> Any:
    """How `export --data` and `forecast --data` read a file (an export.data.ReadOptions): as train read
    its own, by the options model.json's training record holds (`read`: the layout, the columns, fill,
    date format and order, sort, the columns left out; a record of before them holds `drop` alone), in
    `timezone`, with the command's own `--sort`, `--drop` and `--layout` where given (a bad layout is a
    BadParameter on it)."""
    from export.data import ReadOptions

    record = dict(training or {})
    read = ReadOptions.from_record(record.get("read", {"drop": record.get("drop", [])}))
    changes: dict[str, Any] = {"timezone": timezone}
    if sort is not None:
        changes["sort"] = sort
    if drop is not None:
        changes["drop"] = tuple(names(drop))
    if layout is not None:
        if layout not in ("long", "wide"):
            raise typer.BadParameter(f"must be long or wide, got {layout!r}", param_hint="--layout")
        changes["layout"] = "wide" if layout == "wide" else "auto"
    return ReadOptions.of(read, **changes)


def read_histories(data: Path, read: Any) -> tuple[list[Any], str]:
    """A file's series as `read` (an export.data.ReadOptions, from `read_as_trained`) says, without
    covariates: a long file's (`PanelSeries`), or a wide file's one series (named after the file, its
    target the `target_column` or the one column left), and their frequency; DataError as the readers
    raise it."""
    from export.covariates import load_covariate_wide
    from export.data import load_panel

    if read.layout == "wide":
        return load_covariate_wide(data, read, read.target_column)
    panel = load_panel(data, read)
    return list(panel.series), panel.frequency
