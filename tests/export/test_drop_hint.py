"""Issue 45, item 9: the hints work as printed, and export remembers train's --drop. A long file with two
columns that are neither covariates nor the target: train's refusal names `--drop WorkDay,Temperature`
(the option is comma-separated), which run as printed trains; model.json records the columns left out,
and `export --data` reads the file as train did without --drop repeated."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from export.global_models.cli import cli
from tests.utils.panel import HORIZON, write_long


def wide_file(path: Path) -> Path:
    frame = pd.read_csv(write_long(path, n=6))
    frame["WorkDay"] = (pd.to_datetime(frame["ds"]).dt.month % 2).astype(int)
    frame["Temperature"] = 20.0 + frame["y"] % 7
    frame.to_csv(path, index=False)
    return path


def test_the_drop_hint_works_as_printed_and_export_remembers_it(tmp_path: Path) -> None:
    data = wide_file(tmp_path / "stores.csv")
    runner = CliRunner()
    train = ["train", "--data", str(data), "--horizon", str(HORIZON), "--out", str(tmp_path / "run")]
    refused = runner.invoke(cli, train)
    assert refused.exit_code != 0
    said = " ".join(refused.output.split())  # typer wraps its error box
    hint = re.search(r"leave them out with (--drop \S+)", said)
    assert hint is not None and hint.group(1) == "--drop WorkDay,Temperature", said
    trained = runner.invoke(cli, [*train, *shlex.split(hint.group(1))])
    assert trained.exit_code == 0, trained.output
    model = json.loads((tmp_path / "run" / "model.json").read_text())
    assert model["training"]["read"]["drop"] == ["WorkDay", "Temperature"]
    export = ["export", "--model", str(tmp_path / "run" / "model.json"), "--name", "stores"]
    export += ["--repository", str(tmp_path / "repo"), "--data", str(data)]
    exported = runner.invoke(cli, export)
    assert exported.exit_code == 0, exported.output
    assert "coverage out of fold" in exported.output, exported.output
    # --drop given at export still wins: a column train read is not a column to leave out here
    again = runner.invoke(cli, [*export, "--drop", "WorkDay"])
    assert again.exit_code != 0 and "Temperature" in " ".join(again.output.split()), again.output


def test_a_text_column_hint_quotes_a_name_with_a_space(tmp_path: Path) -> None:
    data = tmp_path / "stores.csv"
    frame = pd.read_csv(write_long(data, n=4))
    frame["store name"] = "shop " + frame["unique_id"]
    frame.to_csv(data, index=False)
    runner = CliRunner()
    args = ["train", "--data", str(data), "--horizon", str(HORIZON), "--out", str(tmp_path / "run")]
    refused = runner.invoke(cli, args)
    said = " ".join(refused.output.split())
    assert refused.exit_code != 0 and "--drop 'store name'" in said, said
    assert runner.invoke(cli, [*args, *shlex.split("--drop 'store name'")]).exit_code == 0


def test_a_transformer_remembers_the_drop_too(tmp_path: Path) -> None:
    """The global transformer's model.json records train's --drop as the read-out's does, and `export
    --data` reads the file without --drop repeated (before, only the read-out remembered it); --drop at
    export still wins."""
    data = wide_file(tmp_path / "stores.csv")
    runner = CliRunner()
    train = ["train", "--data", str(data), "--horizon", str(HORIZON), "--out", str(tmp_path / "run")]
    train += ["--network", "transformer", "--input-periods", "2", "--epochs", "1"]
    train += ["--windows-per-epoch", "64", "--drop", "WorkDay,Temperature"]
    trained = runner.invoke(cli, train)
    assert trained.exit_code == 0, trained.output
    model = json.loads((tmp_path / "run" / "model.json").read_text())
    assert model["kind"] == "rsa-transformer-global"
    assert model["training"]["read"]["drop"] == ["WorkDay", "Temperature"]
    export = ["export", "--model", str(tmp_path / "run" / "model.json"), "--name", "stores"]
    export += ["--repository", str(tmp_path / "repo"), "--data", str(data)]
    exported = runner.invoke(cli, export)
    assert exported.exit_code == 0, exported.output
    assert "global transformer" in exported.output and "intervals at" in exported.output, exported.output
    again = runner.invoke(cli, [*export, "--version", "2", "--drop", "WorkDay"])
    assert again.exit_code != 0 and "Temperature" in " ".join(again.output.split()), again.output
