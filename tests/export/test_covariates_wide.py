"""A wide file as one series with a future-known covariate and the calendar (issue 36): an hourly load
that rises with temperature above 18 degrees, trained with `--layout wide`, exported with its intervals
and served on /v1; the served values checked against the Python model fed the same covariates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from export.covariates import CovariateSeries, series_covariate_rows
from export.global_models.cli import cli
from export.global_models.model import GlobalModel
from tests.app.conftest import make_settings, running_client

H, N = 24, 24 * 60


def write_wide(path: Path) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    t = np.arange(N)
    stamps = pd.date_range("2024-05-01", periods=N, freq="h")
    # each day's weather drawn afresh: yesterday's load does not tell tomorrow's temperature
    temp = np.repeat(rng.uniform(12, 28, N // 24), 24) + 3 * np.sin(2 * np.pi * (t - 14) / 24)
    cooling = np.maximum(temp - 18, 0)
    load = 100 + 15 * np.sin(2 * np.pi * t / 24) + 6 * cooling + rng.standard_normal(N)
    frame = pd.DataFrame({"timestamp": stamps, "load": load.round(3), "cooling": cooling.round(3)})
    frame.to_csv(path, index=False)
    return frame


def test_a_wide_file_with_a_future_covariate_from_csv_to_served_forecast(tmp_path: Path) -> None:
    frame = write_wide(tmp_path / "load.csv")
    runner = CliRunner()
    args = ["train", "--data", str(tmp_path / "load.csv"), "--layout", "wide", "--target-column", "load"]
    args += ["--future", "cooling", "--calendar", "hour", "--horizon", str(H), "--period", "24"]
    args += ["--input-periods", "2", "--out", str(tmp_path / "run")]
    train = runner.invoke(cli, args)
    assert train.exit_code == 0, train.output
    assert "covariate cooling: validation MASE" in train.output
    model = GlobalModel.load(tmp_path / "run" / "model.json")
    args = ["export", "--model", str(tmp_path / "run" / "model.json"), "--name", "load"]
    args += ["--repository", str(tmp_path / "repo"), "--data", str(tmp_path / "load.csv"), "--layout", "wide"]
    exported = runner.invoke(cli, args)
    assert exported.exit_code == 0, exported.output
    n = N - H
    y, cooling = frame["load"].to_numpy(), frame["cooling"].to_numpy()
    body = {
        "series": [
            {
                "start": "2024-05-01T00:00:00Z",
                "values": y[:n].tolist(),
                "future": {"cooling": cooling[n:].tolist()},
            }
        ]
    }
    with running_client(make_settings(tmp_path / "repo")) as client:
        r = client.post("/v1/models/load/forecast", json=body)
    assert r.status_code == 200, r.text
    stamps = frame["timestamp"].to_numpy().astype("datetime64[ns]")
    full = CovariateSeries("x", y, stamps, future={"cooling": cooling})
    assert model.covariates is not None
    want = model.forecast([y[:n]], covariates=series_covariate_rows(full, model.covariates, np.array([n])))[0]
    got = np.array(r.json()["forecasts"][0]["forecast"])[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    # the covariate carries the effect: 5 degrees more cooling than there was raises the forecast by
    # about the generated 6 per degree, and misses the actual load
    body["series"][0]["future"]["cooling"] = (cooling[n:] + 5).tolist()
    with running_client(make_settings(tmp_path / "repo")) as client:
        hot = client.post("/v1/models/load/forecast", json=body).json()["forecasts"][0]["forecast"]
    rise = float(np.mean(np.array(hot)[:, 0] - got))
    assert 15 < rise < 45, rise
    actual = y[n:]
    assert np.abs(got - actual).mean() < np.abs(np.array(hot)[:, 0] - actual).mean()
