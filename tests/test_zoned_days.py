"""A daily model trained in Europe/Berlin forecasts local midnights on every path (issue 44/46 follow-up):
/v1, the batch scorer, the client (OIP v2) and `export.panel forecast` step its days on the zone's wall clock
by the one rule (`rsa_core.steps`), across the autumn and the spring change (86,400 s on instants put every
step after a change at 23:00 or 01:00 local), a short series' window start stepped back across one too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from rsa_client import Client
from typer.testing import CliRunner

from batch.score import Forecaster, Job
from export.global_models.cli import cli
from tests.app.conftest import make_settings, running_client
from tests.app.live import live_service
from tests.utils.zoned import ZONE, publish_global

pytestmark = pytest.mark.slow  # trains and exports a model, starts a service process

NAME = "days"
H = 7


def daily_frame() -> pd.DataFrame:
    """Three series of naive Berlin midnights through 2023 (both changes), a weekly pattern and noise."""
    days = pd.date_range("2023-01-01", "2023-11-10", freq="D")
    frames = []
    for i in range(3):
        rng = np.random.default_rng(30 + i)
        y = (
            40
            + 5 * i
            + 6 * np.sin(2 * np.pi * days.day_of_week.to_numpy() / 7)
            + rng.standard_normal(len(days))
        )
        frames.append(
            pd.DataFrame({"unique_id": f"s{i}", "ds": days.strftime("%Y-%m-%d %H:%M:%S"), "y": y.round(3)})
        )
    return pd.concat(frames, ignore_index=True)


def histories(frame: pd.DataFrame) -> pd.DataFrame:
    """s0 ends on 27 October (its horizon crosses the autumn change), s1 is 8 days ending 2 November
    (shorter than the input: its window's start is stepped back across the change), s2 ends on 24 March
    (its horizon crosses the spring change)."""
    ends = {"s0": "2023-10-27 00:00:00", "s1": "2023-11-02 00:00:00", "s2": "2023-03-24 00:00:00"}
    parts = []
    for sid, end in ends.items():
        mine = frame[frame["unique_id"] == sid].reset_index(drop=True)
        at = int(np.flatnonzero(mine["ds"].to_numpy() == end)[0])
        parts.append(mine.iloc[at - 7 : at + 1] if sid == "s1" else mine.iloc[: at + 1])
    return pd.concat(parts, ignore_index=True)


def local_midnights(first: str) -> list[str]:
    """The H midnights of 2023 from `first` (month-day), as the zone's wall clock writes them."""
    return [f"{d:%Y-%m-%d}T00:00:00" for d in pd.date_range(f"2023-{first}", periods=H, freq="D")]


def test_a_zoned_daily_models_forecast_timestamps_agree_on_every_path(tmp_path: Path) -> None:
    frame = daily_frame()
    repository = publish_global(tmp_path, frame, NAME, H, ZONE)
    history = histories(frame)
    # /v1: each series with its first row's naive time, read in the model's zone
    body = [
        {"id": sid, "values": part["y"].tolist(), "start": part["ds"].iloc[0].replace(" ", "T")}
        for sid, part in history.groupby("unique_id")
    ]
    with running_client(make_settings(repository)) as client:
        r = client.post(f"/v1/models/{NAME}/forecast", json={"series": body})
    assert r.status_code == 200, r.text
    v1 = {f["id"]: f["timestamps"] for f in r.json()["forecasts"]}
    want = {sid: local_midnights(first) for sid, first in (("s0", "10-28"), ("s1", "11-03"), ("s2", "03-25"))}
    assert {sid: [t[:19] for t in stamps] for sid, stamps in v1.items()} == want
    assert v1["s0"][1].endswith("+02:00") and v1["s0"][2].endswith("+01:00")  # 29 October, then 30
    assert v1["s2"][1].endswith("+01:00") and v1["s2"][2].endswith("+02:00")  # 26 March, then 27
    wall = {
        sid: np.array([np.datetime64(t) for t in stamps], "datetime64[ns]") for sid, stamps in want.items()
    }
    # batch: naive times in, the model's wall clock out
    table = pa.Table.from_pandas(history, preserve_index=False)
    table = table.set_column(1, "ds", pa.array(pd.to_datetime(history["ds"]).to_numpy(), pa.timestamp("us")))
    scored = Forecaster(Job(str(repository), NAME, threads=1)).score_table(table).to_pandas()
    # the client, through a served model (OIP v2: windows with Unix-seconds starts, its own horizon stamps)
    with live_service(repository, tmp_path / "service.log") as service, Client(service.url) as rsa:
        answered = rsa.forecast(history, model=NAME)
    for name, out in (("batch", scored), ("client", answered)):
        assert sorted(out["unique_id"].unique()) == sorted(want), name
        for sid, rows in out.groupby("unique_id"):
            got = rows["ds"].to_numpy().astype("datetime64[ns]")
            np.testing.assert_array_equal(got, wall[str(sid)], err_msg=f"{name} {sid}")
    # export.panel forecast: UTC instants, the same as /v1's
    csv = tmp_path / "history.csv"
    history.to_csv(csv, index=False)
    model = str(tmp_path / "run" / "model.json")
    done = CliRunner().invoke(
        cli, ["forecast", "--model", model, "--data", str(csv), "--out", str(tmp_path / "f.csv")]
    )
    assert done.exit_code == 0, done.output
    exported = pd.read_csv(tmp_path / "f.csv", parse_dates=["ds"])
    assert sorted(exported["unique_id"].unique()) == sorted(want)
    for sid, rows in exported.groupby("unique_id"):
        utc = pd.to_datetime(v1[str(sid)], utc=True).tz_localize(None).to_numpy()
        np.testing.assert_array_equal(
            rows["ds"].to_numpy().astype("datetime64[ns]"), utc, err_msg=f"export {sid}"
        )
