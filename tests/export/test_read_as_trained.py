"""export and forecast read a file as train read it: a long file whose columns have their own names, whose
dates are day-first (01/02/2021, which also reads as 2 January) and which has a gap is trained with
`--id-column`, `--timestamp-column`, `--target-column`, `--dayfirst` and `--fill linear`; model.json
records them, and `export --data` and `forecast --data` read the same file without any of them repeated.
Before, both refused it (export and forecast had no such options, and the refusal's hint named a fill
option export did not have: fpp3's `us_employment`, a discontinued series' trailing gap)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from export.covariates import CovariateSeries, series_covariate_rows
from export.global_models.cli import cli
from export.global_models.model import GlobalModel
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
    assert list(table.columns) == ["store", "month", "run"]  # the file's own names, to merge on
    first = table[table["store"] == "store_00"]["month"].tolist()
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


def one_series(path: Path, *, extra: bool = False) -> pd.DataFrame:
    """fpp3's form of one monthly series (`souvenirs`, `insurance`): `Month` as `1987 Jan`, a value
    column, and (extra) a future-known covariate."""
    n = 60
    t = np.arange(n)
    month = pd.date_range("2015-01-01", periods=n, freq="MS").strftime("%Y %b")
    sales = 100 + 0.5 * t + 20 * np.sin(2 * np.pi * t / 12)
    frame = pd.DataFrame({"Month": month, "Sales": sales.round(3)})
    if extra:
        adverts = 5 + np.random.default_rng(1).uniform(0, 3, n)
        frame["Sales"] = (frame["Sales"] + 4 * adverts).round(3)
        frame["Adverts"] = adverts.round(3)
    frame.to_csv(path, index=False)
    return frame


def test_a_wide_file_is_exported_and_forecast_as_train_read_it(tmp_path: Path) -> None:
    """One series in its own file, trained with `--layout wide`: model.json records the layout, and
    `export --data` (intervals) and `forecast --data` read the file without it. Before, both read it as a
    long file and refused it (no id column), and a model without covariates could not be read as wide at
    all (export's --layout was the covariate path's alone; forecast had none)."""
    data, run = tmp_path / "souvenirs.csv", tmp_path / "run"
    one_series(data)
    runner = CliRunner()
    train = ["train", "--data", str(data), "--horizon", "6", "--layout", "wide", "--out", str(run)]
    with_id = runner.invoke(cli, [*train, "--id-column", "Month"])
    assert with_id.exit_code != 0 and "a wide file is one series" in " ".join(with_id.output.split())
    trained = runner.invoke(cli, [*train, "--input-periods", "1"])
    assert trained.exit_code == 0, trained.output
    assert json.loads((run / "model.json").read_text())["training"]["read"] == {"layout": "wide"}

    export = ["export", "--model", str(run / "model.json"), "--name", "souvenirs", "--repository"]
    exported = runner.invoke(cli, [*export, str(tmp_path / "repo"), "--data", str(data)])
    assert exported.exit_code == 0, exported.output
    manifest = json.loads((tmp_path / "repo" / "souvenirs" / "1" / "manifest.json").read_text())
    assert 80.0 in manifest["intervals"]["levels"], exported.output  # one series, rolling windows

    out = tmp_path / "forecast.csv"
    forecast = ["forecast", "--model", str(run / "model.json"), "--data", str(data), "--out", str(out)]
    done = runner.invoke(cli, forecast)
    assert done.exit_code == 0, done.output
    table = pd.read_csv(out)
    assert list(table.columns) == ["unique_id", "Month", "run"]  # a wide file has no id column
    assert table["unique_id"].unique().tolist() == ["souvenirs"]  # the series named after its file
    assert table["Month"].tolist()[:2] == ["2020-01-01", "2020-02-01"]
    model = GlobalModel.load(run / "model.json")
    expected = model.forecast([pd.read_csv(data)["Sales"].to_numpy(dtype=float)])[0]
    np.testing.assert_allclose(table["run"].to_numpy(), expected)

    as_long = runner.invoke(cli, [*forecast[:-2], "--layout", "long"])  # the command's own --layout wins
    assert as_long.exit_code != 0 and "no series id column" in " ".join(as_long.output.split())
    bad = runner.invoke(cli, [*forecast[:-2], "--layout", "tall"])
    assert bad.exit_code != 0 and "must be long or wide, got 'tall'" in bad.output


def test_a_file_of_one_series_trains_without_the_layout_option(tmp_path: Path) -> None:
    """A file of a timestamp and a value column alone (fpp3's `souvenirs`, `canadian_gas`) trains as one
    series without `--layout wide`, as the client takes a frame without ids, says so, and records the
    layout, so that export and forecast read the file alike. A file with an id, or an id option, stays
    long; a file of two value columns is refused as before (which one is the target?)."""
    data, run = tmp_path / "souvenirs.csv", tmp_path / "run"
    one_series(data)
    runner = CliRunner()
    train = ["train", "--data", str(data), "--horizon", "6", "--input-periods", "1", "--out", str(run)]
    trained = runner.invoke(cli, train)
    assert trained.exit_code == 0, trained.output
    assert "read as one series named 'souvenirs'" in trained.output
    assert json.loads((run / "model.json").read_text())["training"]["read"] == {"layout": "wide"}
    out = tmp_path / "forecast.csv"
    done = runner.invoke(
        cli, ["forecast", "--model", str(run / "model.json"), "--data", str(data), "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    assert pd.read_csv(out)["unique_id"].unique().tolist() == ["souvenirs"]
    as_id = runner.invoke(cli, [*train, "--id-column", "Month"])  # an id named: read as long, as asked
    assert as_id.exit_code != 0 and "no target column" in " ".join(as_id.output.split())
    two = pd.read_csv(data).assign(Other=1.0)
    two.to_csv(tmp_path / "two.csv", index=False)
    refused = runner.invoke(cli, ["train", "--data", str(tmp_path / "two.csv"), "--horizon", "6"])
    assert refused.exit_code != 0 and "The file is wide" in " ".join(refused.output.split())


def test_a_model_file_that_is_none_is_refused_on_the_option(tmp_path: Path) -> None:
    """`--model` missing, a folder, not JSON or JSON of another kind: a refusal naming the option, never a
    traceback."""
    runner = CliRunner()
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "other.json").write_text('{"kind": "other"}')
    data = tmp_path / "souvenirs.csv"
    one_series(data)
    for given, said in (
        (tmp_path / "none.json", "does not exist"),
        (tmp_path, "is a directory"),
        (tmp_path / "bad.json", "not a model.json written by `python -m export.panel train`"),
        (tmp_path / "other.json", "not a model.json written by `python -m export.panel train`"),
    ):
        for args in (
            ["forecast", "--model", str(given), "--data", str(data), "--out", str(tmp_path / "f.csv")],
            ["export", "--model", str(given), "--name", "x", "--repository", str(tmp_path / "repo")],
        ):
            result = runner.invoke(cli, args)
            text = " ".join(re.sub("[│╭╮╰╯─]", " ", result.output).split())  # the error box's lines joined
            assert result.exit_code == 2 and "--model" in text and said in text, (args, result.output)


def test_a_wide_covariate_model_is_forecast_with_a_wide_future_file(tmp_path: Path) -> None:
    """The same with a future-known covariate: forecast reads the history as wide and the future values
    from a file of the timestamp and that column, as the history writes them; the answer equals the
    Python model's with the same rows."""
    data, run = tmp_path / "insurance.csv", tmp_path / "run"
    frame = one_series(data, extra=True)
    runner = CliRunner()
    train = ["train", "--data", str(data), "--horizon", "6", "--layout", "wide", "--future", "Adverts"]
    trained = runner.invoke(cli, [*train, "--input-periods", "1", "--out", str(run)])
    assert trained.exit_code == 0, trained.output
    export = ["export", "--model", str(run / "model.json"), "--name", "ins", "--repository"]
    exported = runner.invoke(cli, [*export, str(tmp_path / "repo"), "--data", str(data)])
    assert exported.exit_code == 0, exported.output

    ahead = [3.0, 7.5, 6.0, 4.0, 5.5, 7.0]
    months = pd.date_range("2020-01-01", periods=6, freq="MS").strftime("%Y %b")
    future = tmp_path / "future.csv"
    pd.DataFrame({"Month": months, "Adverts": ahead}).to_csv(future, index=False)
    out = tmp_path / "forecast.csv"
    forecast = ["forecast", "--model", str(run / "model.json"), "--data", str(data), "--out", str(out)]
    done = runner.invoke(cli, [*forecast, "--future-file", str(future)])
    assert done.exit_code == 0, done.output
    model = GlobalModel.load(run / "model.json")
    assert model.covariates is not None
    stamps = pd.date_range("2015-01-01", periods=66, freq="MS").to_numpy()
    full = CovariateSeries(
        "insurance",
        np.r_[frame["Sales"].to_numpy(dtype=float), np.full(6, np.nan)],
        stamps,
        future={"Adverts": np.r_[np.zeros(60), ahead]},
    )
    rows = series_covariate_rows(full, model.covariates, np.array([60]))
    expected = model.forecast([frame["Sales"].to_numpy(dtype=float)], covariates=rows)[0]
    np.testing.assert_allclose(pd.read_csv(out)["run"].to_numpy(), expected, rtol=1e-9)

    pd.DataFrame({"Month": months, "Adverts": ahead, "Other": 1}).to_csv(future, index=False)
    extra = runner.invoke(cli, [*forecast, "--future-file", str(future)])
    assert extra.exit_code != 0 and "not future covariates of the model" in " ".join(extra.output.split())
