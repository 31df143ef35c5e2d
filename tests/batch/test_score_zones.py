"""Batch scoring of naive local times for a zoned model, and of series shorter than a global model's
input: the trainer's reading of the autumn repeat (a repeated wall-clock time is summer time the first
time, standard time once the clock has gone back; export.data.timestamps.localize), a time the spring
change skips refused naming the series and its row, and the answers /v1's for the same rows sent with an
explicit-offset start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from batch.score import Forecaster, FutureRows, Job
from export.data.timestamps import localize
from tests.app.conftest import make_settings, running_client
from tests.utils.zoned import AUTUMN, BERLIN, ZONE, ending_in_the_repeat, publish_berlin, publish_global


def v1_answers(repository: Path, name: str, series: dict[str, tuple[np.ndarray, Any]]) -> dict[str, Any]:
    """/v1's answer for each series (values, the explicit-offset start of the first one), one request."""
    body = [{"id": k, "values": v.tolist(), "start": s} for k, (v, s) in series.items()]
    with running_client(make_settings(repository)) as client:
        r = client.post(f"/v1/models/{name}/forecast", json={"series": body})
    assert r.status_code == 200, r.text
    return {f["id"]: f for f in r.json()["forecasts"]}


@pytest.fixture(scope="module")
def berlin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    return publish_berlin(tmp_path_factory.mktemp("batch-zones"))


def test_the_autumn_repeat_is_read_as_the_trainer_reads_it(berlin: tuple[Path, pd.DataFrame]) -> None:
    """s0 ends on the second 02:00 (standard time), s1 on the first (summer time), s2 short of the input
    length inside the repeat: each forecast's naive times and values are /v1's for the same rows sent with
    the start's offset written out; the horizon after the first 02:00 starts at the second."""
    repository, frame = berlin
    history = ending_in_the_repeat(frame, {"s0": 1, "s1": 0, "s2": 1}, short={"s2": 30})
    table = pa.Table.from_pandas(history, preserve_index=False)
    table = table.set_column(1, "ds", pa.array(pd.to_datetime(history["ds"]).to_numpy(), pa.timestamp("us")))
    out = Forecaster(Job(str(repository), "berlin", threads=1)).score_table(table).to_pandas()
    sent = {}
    for sid, part in history.groupby("unique_id"):
        tail = part.tail(48)
        starts = np.r_[True, np.zeros(len(part) - 1, bool)]
        utc, skipped = localize(pd.to_datetime(part["ds"]).to_numpy(), ZONE, starts)
        assert not skipped.any()
        first = pd.Timestamp(utc[len(part) - len(tail)]).tz_localize("UTC").isoformat()
        sent[str(sid)] = (tail["y"].to_numpy(), first)
    expected = v1_answers(repository, "berlin", sent)
    for sid, rows_ in out.groupby("unique_id"):
        want = expected[sid]
        stamps = np.array([np.datetime64(t[:19]) for t in want["timestamps"]], "datetime64[us]")
        assert (rows_["ds"].to_numpy().astype("datetime64[us]") == stamps).all(), sid
        np.testing.assert_array_equal(rows_[["berlin"]].to_numpy(), np.asarray(want["forecast"], np.float32))
    assert expected["s0"]["timestamps"][0].startswith("2023-10-29T03:00:00+01:00")
    assert expected["s1"]["timestamps"][0].startswith("2023-10-29T02:00:00+01:00")


def naive(frame: pd.DataFrame) -> pa.Table:
    """`frame` as a table whose `ds` is a naive timestamp column, rows in its order."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    column = pa.array(pd.to_datetime(frame["ds"]).to_numpy(), pa.timestamp("us"))
    return table.set_column(table.column_names.index("ds"), "ds", column)


def test_a_future_table_over_the_repeat_is_read_by_its_order(tmp_path: Path) -> None:
    """A Berlin model with a future covariate: each series' history ends at 22:00 the evening before the
    change, its future rows (naive, in order) hold 02:00 twice; they are the 12 steps the model needs
    (read as one hour, the second 02:00 was refused), read from a Parquet part too, and the answers are
    /v1's with the future values sent and the start's offset written out."""
    repository, frame = publish_berlin(tmp_path, heat=True)
    step = frame.groupby("unique_id").cumcount()
    n = int(np.flatnonzero(frame["ds"].to_numpy() == "2023-10-28 22:00:00")[0]) + 1
    history = frame[step < n].reset_index(drop=True)
    future = frame[(step >= n) & (step < n + 12)][["unique_id", "ds", "heat"]].reset_index(drop=True)
    assert (future["ds"] == AUTUMN).sum() == 6
    pq.write_table(naive(future), tmp_path / "future.parquet")
    read = FutureRows(str(tmp_path / "future.parquet"), "unique_id", "ds", ["heat"], ZONE)
    forecaster = Forecaster(Job(str(repository), BERLIN, threads=1))
    out = forecaster.score_table(naive(history), naive(future)).to_pandas()
    keys = pa.array(["s0", "s1", "s2"])
    again = forecaster.score_table(naive(history), read.read("future.parquet", keys)).to_pandas()
    pd.testing.assert_frame_equal(out, again)
    series = []
    for sid, part in history.groupby("unique_id"):
        utc = localize(pd.to_datetime(part["ds"]).to_numpy(), ZONE)[0]
        heat = future[future["unique_id"] == sid]["heat"].tolist()
        start = pd.Timestamp(utc[-48]).tz_localize("UTC").isoformat()
        series.append(
            {"id": sid, "values": part["y"].tail(48).tolist(), "start": start, "future": {"heat": heat}}
        )
    with running_client(make_settings(repository)) as client:
        r = client.post(f"/v1/models/{BERLIN}/forecast", json={"series": series})
    assert r.status_code == 200, r.text
    for f in r.json()["forecasts"]:
        rows = out[out["unique_id"] == f["id"]]
        stamps = np.array([np.datetime64(t[:19]) for t in f["timestamps"]], "datetime64[us]")
        assert (rows["ds"].to_numpy().astype("datetime64[us]") == stamps).all(), f["id"]
        np.testing.assert_array_equal(rows[[BERLIN]].to_numpy(), np.asarray(f["forecast"], np.float32))


def test_a_time_the_spring_change_skips_is_refused_naming_the_series(
    berlin: tuple[Path, pd.DataFrame],
) -> None:
    repository, frame = berlin
    bad = frame[frame["unique_id"].isin(["s0", "s1"])].groupby("unique_id").head(60).copy()
    bad.loc[bad.index[65], "ds"] = "2024-03-31 02:30:00"  # s1's row 5: the clocks go from 02:00 to 03:00
    table = pa.Table.from_pandas(bad, preserve_index=False)
    table = table.set_column(1, "ds", pa.array(pd.to_datetime(bad["ds"]).to_numpy(), pa.timestamp("us")))
    with pytest.raises(ValueError, match=r"series 's1' row 5 .*2024-03-31T02:30:00 does not exist in Europe"):
        Forecaster(Job(str(repository), "berlin", threads=1)).score_table(table)


def test_a_series_shorter_than_the_input_is_stepped_back_from_its_own_first_row(tmp_path: Path) -> None:
    """A monthly global model (L = 36) and a table of series shorter than L (one of them alone: fewer
    rows than L, where the window's first row was read from beyond the table): the window's first time is
    the series' own first month stepped back, as /v1 reads a short series' start; the answers are /v1's."""
    months = pd.date_range("2010-01-01", "2019-12-01", freq="MS")
    frames = []
    for i in range(4):
        rng = np.random.default_rng(10 + i)
        y = (
            100
            + 5 * i
            + 8 * np.sin(2 * np.pi * months.month.to_numpy() / 12)
            + rng.standard_normal(len(months))
        )
        frames.append(pd.DataFrame({"unique_id": f"m{i}", "ds": months, "y": y.round(3)}))
    frame = pd.concat(frames, ignore_index=True)
    repository = publish_global(tmp_path, frame, "monthly", 6, periods=3)
    short = pd.concat([frame[frame["unique_id"] == f"m{i}"].tail(12 + 5 * i) for i in range(2)])
    short = short.reset_index(drop=True)
    forecaster = Forecaster(Job(str(repository), "monthly", threads=1))
    assert forecaster.manifest.input_length == 36 and forecaster.manifest.calendar is not None
    alone = forecaster.score_table(pa.Table.from_pandas(short.head(12), preserve_index=False))
    out = forecaster.score_table(pa.Table.from_pandas(short, preserve_index=False))
    pd.testing.assert_frame_equal(alone.to_pandas(), out.to_pandas().head(6))
    sent = {
        str(sid): (part["y"].to_numpy(), part["ds"].iloc[0].isoformat())
        for sid, part in short.groupby("unique_id")
    }
    expected = v1_answers(repository, "monthly", sent)
    for sid, rows in out.to_pandas().groupby("unique_id"):
        want = expected[sid]
        stamps = np.array([np.datetime64(t[:19]) for t in want["timestamps"]], "datetime64[us]")
        assert (rows["ds"].to_numpy().astype("datetime64[us]") == stamps).all(), sid
        np.testing.assert_array_equal(rows[["monthly"]].to_numpy(), np.asarray(want["forecast"], np.float32))
