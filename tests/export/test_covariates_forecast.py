"""`python -m export.panel forecast` for a covariate model (issue 36): the history file carries the past and
static covariates as columns, `--future-file` the future ones for the H steps after each series (as
NeuralForecast's `futr_df`, TimeGPT's `X_df`). The shops of test_covariates_served.py: the CLI's values
equal the Python model's forecast with the trainer's covariate rows and the served /v1 answer; every
mistake in either file is refused naming the file, the series and the column."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from export.covariates import CovariateSeries, series_covariate_rows
from export.global_models.cli import cli
from export.global_models.model import GlobalModel
from tests.app.conftest import make_settings, running_client
from tests.export.test_covariates_served import DAYS, H, expected, request_series, write_shops

N = DAYS - H  # each shop's history: all but the last H days


@dataclass(frozen=True)
class Trained:
    folder: Path
    model_file: Path
    model: GlobalModel
    shops: dict[str, dict[str, Any]]
    frame: pd.DataFrame  # the training file


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    folder = tmp_path_factory.mktemp("covariate_forecast")
    shops = write_shops(folder / "shops.csv", n=4)
    args = ["train", "--data", str(folder / "shops.csv"), "--horizon", str(H), "--input-periods", "4"]
    args += ["--future", "promo", "--past", "footfall", "--static", "size", "--calendar", "dayofweek"]
    train = CliRunner().invoke(cli, [*args, "--out", str(folder / "run")])
    assert train.exit_code == 0, train.output
    model_file = folder / "run" / "model.json"
    frame = pd.read_csv(folder / "shops.csv", dtype={"ds": str})
    return Trained(folder, model_file, GlobalModel.load(model_file), shops, frame)


def files(t: Trained, where: Path, short: bool = True) -> tuple[Path, Path]:
    """The history (each shop's first N days, the training file's columns; shop_3 as a new shop of 10
    days when `short`) and the future file (id, timestamp, promo of the H days after each)."""
    f = t.frame
    day = f.groupby("unique_id").cumcount()
    keep = day < N
    if short:
        keep &= (f["unique_id"] != "shop_3") | (day >= N - 10)
    f[keep].to_csv(where / "history.csv", index=False)
    future = f[(day >= N) & (day < N + H)][["unique_id", "ds", "promo"]]
    future.to_csv(where / "future.csv", index=False)
    return where / "history.csv", where / "future.csv"


def run(t: Trained, history: Path, future: Path | None, out: Path | None = None, *more: str) -> Any:
    args = ["forecast", "--model", str(t.model_file), "--data", str(history), *more]
    args += [] if future is None else ["--future-file", str(future)]
    args += [] if out is None else ["--out", str(out)]
    return CliRunner().invoke(cli, args)


def test_the_cli_forecasts_a_covariate_model_as_the_model_and_the_service_do(
    trained: Trained, tmp_path: Path
) -> None:
    history, future = files(trained, tmp_path)
    result = run(trained, history, future, tmp_path / "forecast.csv", "--name", "shops")
    assert result.exit_code == 0, result.output
    got = pd.read_csv(tmp_path / "forecast.csv")
    # the forecast column is named after the model, as the client and the batch command name it
    assert list(got.columns) == ["unique_id", "ds", "shops"] and len(got) == 4 * H
    for sid, s in trained.shops.items():
        rows = got[got["unique_id"] == sid]
        start = N - 10 if sid == "shop_3" else 0
        want = expected(trained.model, s, N, start)  # GlobalModel.forecast, the trainer's covariate rows
        np.testing.assert_allclose(rows["shops"].to_numpy(), want, rtol=1e-9, atol=1e-9)
        assert [pd.Timestamp(x).date() for x in rows["ds"]] == [x.date() for x in s["stamps"][N : N + H]]
    # the service, fed the same series, answers the same numbers
    repo = tmp_path / "repo"
    args = ["export", "--model", str(trained.model_file), "--name", "shops", "--repository", str(repo)]
    exported = CliRunner().invoke(cli, args)
    assert exported.exit_code == 0, exported.output
    s0, s3 = trained.shops["shop_0"], trained.shops["shop_3"]
    body = {"series": [request_series(s0, "shop_0", N), request_series(s3, "shop_3", N, N - 10)]}
    with running_client(make_settings(repo)) as client:
        r = client.post("/v1/models/shops/forecast", json=body)
    assert r.status_code == 200, r.text
    for f in r.json()["forecasts"]:
        mine = got[got["unique_id"] == f["id"]]["shops"].to_numpy()
        np.testing.assert_allclose(np.array(f["forecast"])[:, 0], mine, rtol=1e-4, atol=1e-3)
    # the future values are read: other promotions, another forecast
    flipped = pd.read_csv(future)
    flipped["promo"] = 1 - flipped["promo"]
    flipped.to_csv(tmp_path / "flipped.csv", index=False)
    other = run(trained, history, tmp_path / "flipped.csv", tmp_path / "other.csv", "--name", "shops")
    assert other.exit_code == 0, other.output
    assert np.abs(pd.read_csv(tmp_path / "other.csv")["shops"] - got["shops"]).min() > 1.0


def said(result: Any) -> str:
    """The CLI's error without typer's box and its line breaks."""
    lines = [line.strip().strip("│╭╰─").strip() for line in result.output.splitlines()]
    return " ".join(x for x in lines if x)


def _drop_series(f: pd.DataFrame) -> pd.DataFrame:
    return f[f["unique_id"] != "shop_2"]


def _drop_row(f: pd.DataFrame) -> pd.DataFrame:
    return f.drop(f.index[f["unique_id"] == "shop_1"][-1])


def _shift(f: pd.DataFrame) -> pd.DataFrame:
    f = f.copy()
    later = (pd.to_datetime(f["ds"]) + pd.Timedelta(days=1)).dt.date.astype(str)
    f["ds"] = np.where(f["unique_id"] == "shop_1", later, f["ds"])
    return f


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (_drop_series, ["future.csv: no rows for series 'shop_2'", "the 7 steps after"]),
        (_drop_row, ["future.csv (series 'shop_1'): 6 rows", "needs 7"]),
        (_shift, ["future.csv (series 'shop_1'): row 1 of the series is at", "horizon step 1"]),
        (lambda f: f.assign(price=1.0), ["future.csv line 1, column 'price': not a future covariate"]),
        (lambda f: f.drop(columns="promo"), ["future.csv line 1, column 'promo': missing"]),
        (lambda f: f.assign(promo=f["promo"].astype(object).where(f.index != f.index[3], "x")), ["'promo'"]),
        (
            lambda f: pd.concat([f, f.iloc[:1].assign(unique_id="shop_9")]),
            ["future.csv (series 'shop_9'): no such series in history.csv"],
        ),
    ],
)
def test_a_bad_future_file_is_refused_naming_series_and_column(
    trained: Trained, tmp_path: Path, change: Callable[[pd.DataFrame], pd.DataFrame], words: list[str]
) -> None:
    history, future = files(trained, tmp_path, short=False)
    change(pd.read_csv(future, dtype={"ds": str})).to_csv(future, index=False)
    result = run(trained, history, future)
    assert result.exit_code == 2 and "Invalid value for --future-file" in said(result), result.output
    for w in words:
        assert w in said(result), result.output


def test_a_history_without_its_covariates_or_a_future_file_is_refused(
    trained: Trained, tmp_path: Path
) -> None:
    history, future = files(trained, tmp_path, short=False)
    result = run(trained, history, None)
    assert result.exit_code == 2, result.output
    assert "--future-file: the model reads the future covariates ['promo']" in said(result), result.output
    pd.read_csv(history).drop(columns="footfall").to_csv(tmp_path / "h.csv", index=False)
    result = run(trained, tmp_path / "h.csv", future)
    assert result.exit_code == 2, result.output
    assert "--data: h.csv line 1, column 'footfall': missing" in said(result), result.output
    pd.read_csv(history).assign(note="x").to_csv(tmp_path / "h.csv", index=False)
    result = run(trained, tmp_path / "h.csv", future)
    assert result.exit_code == 2 and "--drop note" in said(result), result.output
    assert run(trained, tmp_path / "h.csv", future, None, "--drop", "note").exit_code == 0
    big = pd.read_csv(history).assign(size=lambda f: f["size"].where(f["unique_id"] != "shop_1", "huge"))
    big.to_csv(tmp_path / "h.csv", index=False)
    result = run(trained, tmp_path / "h.csv", future)
    assert result.exit_code == 2, result.output
    assert "h.csv (series 'shop_1'): static covariate 'size' must be one of" in said(result), result.output


def test_a_zoned_model_reads_both_files_in_its_zone_across_a_clock_change(tmp_path: Path) -> None:
    """An hourly Berlin model with the hour of day: the history and the future file in naive local time,
    the horizon over the spring change (02:00 on 26 March 2023 does not exist); the CLI's values are the
    model's with the trainer's rows over the UTC instants, the calendar read in Berlin."""
    zone, h = "Europe/Berlin", 24
    stamps = pd.date_range("2023-01-20", "2023-03-27 23:00", freq="h", tz=zone)  # instants, local labels
    local = stamps.strftime("%Y-%m-%d %H:%M:%S")
    rows, series = [], {}
    for i in range(2):
        rng = np.random.default_rng(i)
        heat = np.repeat(rng.uniform(0, 8, len(stamps) // 24 + 1), 24)[: len(stamps)]
        daily = 15 * np.sin(2 * np.pi * stamps.hour.to_numpy() / 24)  # by the local clock
        y = 100 + 20 * i + daily + 4 * heat + rng.standard_normal(len(stamps))
        series[f"s{i}"] = (y.round(3), heat.round(3))
        rows += [(f"s{i}", local[k], y[k].round(3), heat[k].round(3)) for k in range(len(stamps))]
    frame = pd.DataFrame(rows, columns=["unique_id", "ds", "y", "heat"])
    frame.to_csv(tmp_path / "all.csv", index=False)
    args = ["train", "--data", str(tmp_path / "all.csv"), "--horizon", str(h), "--input-periods", "2"]
    args += ["--future", "heat", "--calendar", "hour", "--timezone", zone, "--out", str(tmp_path / "run")]
    train = CliRunner().invoke(cli, args)
    assert train.exit_code == 0, train.output
    model = GlobalModel.load(tmp_path / "run" / "model.json")
    n = int(np.flatnonzero(local == "2023-03-25 23:00:00")[0]) + 1  # the history ends there
    step = frame.groupby("unique_id").cumcount()
    frame[step < n].to_csv(tmp_path / "history.csv", index=False)
    future = frame[(step >= n) & (step < n + h)][["unique_id", "ds", "heat"]]
    assert "2023-03-26 02:00:00" not in set(future["ds"]) and "2023-03-26 03:00:00" in set(future["ds"])
    future.to_csv(tmp_path / "future.csv", index=False)
    t = Trained(tmp_path, tmp_path / "run" / "model.json", model, {}, frame)
    result = run(t, tmp_path / "history.csv", tmp_path / "future.csv", tmp_path / "out.csv")
    assert result.exit_code == 0, result.output
    got = pd.read_csv(tmp_path / "out.csv")
    utc = stamps.tz_convert("UTC").tz_localize(None).to_numpy().astype("datetime64[ns]")
    assert model.covariates is not None and model.covariates.timezone == zone
    for sid, (y, heat) in series.items():
        full = CovariateSeries(sid, y[: n + h], utc[: n + h], future={"heat": heat[: n + h]})
        rows_ = series_covariate_rows(full, model.covariates, np.array([n]))
        want = model.forecast([y[:n]], covariates=rows_)[0]
        mine = got[got["unique_id"] == sid]
        # without --name, the column is named after the model's folder (run/model.json: `run`)
        np.testing.assert_allclose(mine[t.model_file.parent.name].to_numpy(), want, rtol=1e-9, atol=1e-9)
        assert pd.to_datetime(mine["ds"]).tolist() == list(pd.to_datetime(utc[n : n + h]))  # UTC
    # a local time the clocks skip is refused, naming it
    bad = future.copy()
    bad.loc[bad["ds"] == "2023-03-26 03:00:00", "ds"] = "2023-03-26 02:00:00"
    bad.to_csv(tmp_path / "future.csv", index=False)
    result = run(t, tmp_path / "history.csv", tmp_path / "future.csv")
    assert result.exit_code == 2 and "does not exist in Europe/Berlin" in said(result), result.output


def test_a_horizon_of_one_is_refused_saying_why(trained: Trained, tmp_path: Path) -> None:
    args = ["train", "--data", str(trained.folder / "shops.csv"), "--horizon", "1", "--input-periods", "2"]
    args += ["--future", "promo", "--drop", "footfall,size"]
    train = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "run")])
    assert train.exit_code == 0, train.output
    history, future = files(trained, tmp_path, short=False)
    one = pd.read_csv(future).groupby("unique_id").head(1)
    one.to_csv(future, index=False)
    t = Trained(tmp_path, tmp_path / "run" / "model.json", trained.model, {}, trained.frame)
    history_only = pd.read_csv(history).drop(columns=["footfall", "size"])
    history_only.to_csv(history, index=False)
    result = run(t, history, future)
    assert result.exit_code == 2, result.output
    assert "a model of horizon 1" in said(result) and "through the service" in said(result), result.output
