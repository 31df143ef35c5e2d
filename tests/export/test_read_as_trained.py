"""export and forecast read a file as train read it: a long file whose columns have their own names, whose
dates are day-first (01/02/2021, which also reads as 2 January) and which has a gap is trained with
`--id-column`, `--timestamp-column`, `--target-column`, `--dayfirst` and `--fill linear`; model.json
records them, and `export --data` and `forecast --data` read the same file without any of them repeated.
Before, both refused it (export and forecast had no such options, and the refusal's hint named a fill
option export did not have: fpp3's `us_employment`, a discontinued series' trailing gap)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from export.global_models.cli import cli
from export.global_models.options import read_as_trained
from tests.utils.panel import HORIZON, write_long


def own_file(path: Path) -> Path:
    frame = pd.read_csv(write_long(path, n=6))
    frame["ds"] = pd.to_datetime(frame["ds"]).dt.strftime("%d/%m/%Y")  # day-first, every day 01
    frame.loc[5, "y"] = None  # a gap inside store_00
    frame.columns = ["store", "month", "sales"]
    frame.to_csv(path, index=False)
    return path


def test_export_and_forecast_read_the_file_as_train_did(tmp_path: Path) -> None:
    data, run = own_file(tmp_path / "sales.csv"), tmp_path / "run"
    runner = CliRunner()
    train = ["train", "--data", str(data), "--horizon", str(HORIZON), "--out", str(run)]
    train += ["--id-column", "store", "--timestamp-column", "month", "--target-column", "sales"]
    train += ["--fill", "linear", "--input-periods", "2"]
    refused = runner.invoke(cli, train)  # read month-first, 01/02/2021 is 2 January: the refusal names it
    assert refused.exit_code != 0 and "--dayfirst" in " ".join(refused.output.split()), refused.output
    trained = runner.invoke(cli, [*train, "--dayfirst"])
    assert trained.exit_code == 0, trained.output
    assert "1 missing value(s) filled (linear)" in trained.output, trained.output
    read = json.loads((run / "model.json").read_text())["training"]["read"]
    assert read == {
        "id_column": "store",
        "timestamp_column": "month",
        "target_column": "sales",
        "fill": "linear",
        "dayfirst": True,
    }

    export = ["export", "--model", str(run / "model.json"), "--name", "sales", "--repository"]
    exported = runner.invoke(cli, [*export, str(tmp_path / "repo"), "--data", str(data)])
    assert exported.exit_code == 0, exported.output
    assert "coverage out of fold" in exported.output, exported.output

    out = tmp_path / "forecast.csv"
    forecast = ["forecast", "--model", str(run / "model.json"), "--data", str(data), "--out", str(out)]
    assert runner.invoke(cli, forecast).exit_code == 0
    table = pd.read_csv(out)
    first = table[table["unique_id"] == "store_00"]["ds"].tolist()
    assert first[:2] == ["2024-01-01", "2024-02-01"]  # 48 months from January 2020, read day-first


def test_a_record_of_before_read_options_keeps_its_dropped_columns() -> None:
    """model.json files written before `read` hold `drop` alone; export still leaves those columns out,
    and the command's own --sort and --drop win over the record."""
    legacy = read_as_trained({"series": 3, "drop": ["WorkDay"]}, timezone=None)
    assert legacy.drop == ("WorkDay",) and legacy.fill == "none"
    record = {"read": {"fill": "ffill", "sort": True, "drop": ["a"]}}
    given = read_as_trained(record, timezone="Europe/Berlin", sort=False, drop="b,c")
    assert (given.fill, given.sort, given.drop, given.timezone) == (
        "ffill",
        False,
        ("b", "c"),
        "Europe/Berlin",
    )
