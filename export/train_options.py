"""`python -m export.train`'s options (each declared once, its help as `--help` prints it) and the
config overrides they stand for (`cli_overrides`: `--horizon 96` is `--set model.horizon=96`); the
command itself is export/train.py's `main`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["cli_overrides"]

ConfigArgument = Annotated[
    Path | None, typer.Argument(help="YAML config file (see configs/; default: configs/own-data.yaml)")
]
HorizonOption = Annotated[int | None, typer.Option(help="forecast horizon H")]
InputLengthOption = Annotated[int | None, typer.Option(help="input window L")]
VariantOption = Annotated[str | None, typer.Option(help="rsa or baseline")]
SeedOption = Annotated[int | None, typer.Option()]
EpochsOption = Annotated[int | None, typer.Option()]
DataOption = Annotated[str | None, typer.Option(help="CSV file")]
TargetOption = Annotated[
    str | None,
    typer.Option(help="target column (default: OT, or the file's one numeric column; mode M: the first)"),
]
ModeOption = Annotated[str | None, typer.Option(help="M: every column in and out; S: the target only")]
TimestampColumnOption = Annotated[str | None, typer.Option(help="the timestamp column's name")]
DateFormatOption = Annotated[
    str | None,
    typer.Option(help="the timestamps' format, e.g. '%d/%m/%Y' (default: read off the column)"),
]
DayfirstOption = Annotated[
    bool | None,
    typer.Option(
        "--dayfirst/--monthfirst",
        help="dates like 01/02/2015: day first or month first (default: refuse)",
    ),
]
DropOption = Annotated[
    list[str] | None, typer.Option(help="a column to leave out (repeat for more), e.g. a text column")
]
KeepOption = Annotated[
    list[str] | None, typer.Option(help="the only column to use (repeat for more); default: all")
]
FillOption = Annotated[
    str | None,
    typer.Option(help="missing values and steps: none (an error), linear or ffill (rows inserted, filled)"),
]
TimezoneOption = Annotated[
    str | None,
    typer.Option(
        help="IANA zone of timestamps without offset, e.g. Europe/Berlin: local times, daylight saving "
        "understood, the cycle follows local time (default: UTC)"
    ),
]
NonnegativeOption = Annotated[
    list[str] | None,
    typer.Option(
        help="a channel that is never negative (repeat for more), or all, none, auto (default: channels "
        "with no negative value and 5% zeros in the training rows): interval bounds clipped at 0"
    ),
]
OutOption = Annotated[str | None, typer.Option(help="folder for run folders")]
NameOption = Annotated[str | None, typer.Option(help="run name")]
SetOption = Annotated[
    list[str] | None, typer.Option("--set", help="key=value override, e.g. model.d_model=64")
]
QuietOption = Annotated[bool, typer.Option(help="no progress bars or per-epoch lines")]


# Options that set a config key by name: written as given (`--horizon 96` is `model.horizon=96`).
_PLAIN = {
    "horizon": "model.horizon",
    "input_length": "model.input_length",
    "variant": "variant",
    "seed": "seed",
    "epochs": "epochs",
    "data": "data",
    "target": "target",
    "mode": "mode",
    "timestamp_column": "timestamp_column",
    "fill": "fill",
    "timezone": "timezone",
    "out": "out",
    "name": "name",
}


def cli_overrides(given: dict[str, Any]) -> list[str]:
    """The `--set` overrides the command's options stand for (`given`: its parameters by name), the
    explicit `--set` ones first, in the order the config applies them."""
    overrides = list(given["set_"] or [])
    for option, key in _PLAIN.items():
        if given[option] is not None:
            overrides.append(f"{key}={given[option]}")
    for key in ("date_format", "dayfirst"):
        if given[key] is not None:
            overrides.append(f"{key}={json.dumps(given[key])}")  # a YAML (JSON) string or boolean, as written
    for key in ("drop", "keep", "nonnegative"):
        if given[key]:
            overrides.append(f"{key}={json.dumps(list(given[key]))}")  # a YAML (JSON) list
    if given["quiet"]:
        overrides.append("progress=false")
    return overrides
