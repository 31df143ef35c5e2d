"""The client's rule for naive local times (`_wall_clock`: rsa_core.wallclock.localize itself since issue
44, tests/rsa_core/test_one_rule.py) reads the trainer's way on a file of several series over an autumn
repeat and a spring gap, and `_aware` refuses a skipped time naming
its series and row; `Client.forecast` of a served Berlin model over the autumn repeat gives /v1's
timestamps and values for the same rows sent with an explicit-offset start."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
from rsa_client import Client
from rsa_client.frames import _aware, _ordered, _wall_clock

from export.data.timestamps import localize
from tests.app.live import live_service
from tests.utils.zoned import BERLIN, ZONE, ending_in_the_repeat, publish_berlin


def local_times(start: str, end: str, freq: str) -> list[str]:
    """Every instant from `start` to `end` (Berlin) written as its naive wall-clock time."""
    return list(pd.date_range(start, end, freq=freq, tz=ZONE).strftime("%Y-%m-%d %H:%M:%S"))


def a_file() -> tuple[np.ndarray, np.ndarray]:
    """Naive times of several series laid end to end, and the rows that begin one: quarter hours through
    the autumn repeat (02:00 .. 02:45 twice), hours ending on the repeat's first 02:00 followed by a
    series that begins inside the repeat, a series that crosses the spring gap with a skipped time, one
    that repeats a time outside any change, and one with a missing time."""
    spring = local_times("2023-03-26 03:00", "2023-03-26 06:00", "h")
    series = [
        local_times("2023-10-29 00:00", "2023-10-29 05:00", "15min"),
        [
            *local_times("2023-10-28 20:00", "2023-10-29 00:00", "h"),
            "2023-10-29 01:00:00",
            "2023-10-29 02:00:00",
        ],
        ["2023-10-29 02:00:00", "2023-10-29 02:30:00", "2023-10-29 02:30:00", "2023-10-29 03:00:00"],
        ["2023-03-26 00:00:00", "2023-03-26 01:00:00", "2023-03-26 02:00:00", "2023-03-26 02:30:00", *spring],
        ["2023-06-01 10:00:00", "2023-06-01 10:00:00", "2023-06-01 11:00:00"],
        ["2023-10-29 02:15:00", "NaT", "2023-10-29 02:15:00", "2023-10-29 02:45:00"],
    ]
    stamps = np.array([np.datetime64(t) for s in series for t in s], "datetime64[ns]")
    starts = np.concatenate([np.r_[True, np.zeros(len(s) - 1, bool)] for s in series])
    return stamps, starts


def test_the_clients_rule_is_the_trainers() -> None:
    stamps, starts = a_file()
    want, want_skipped = localize(stamps, ZONE, starts)
    got, got_skipped = _wall_clock(stamps, ZONE, starts)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_skipped, want_skipped)
    assert want_skipped.sum() == 2  # the spring gap's 02:00 and 02:30
    # the quarter hours are 25 distinct instants, 15 minutes apart, over the repeat
    quarters = got[:25].astype("int64")
    assert (np.diff(quarters) == 15 * 60 * 10**9).all()
    # without the series' starts the rule would run on from the hours' first 02:00 into the next series
    both = _wall_clock(stamps, ZONE)[0]
    # and read the next series' 02:00 and its first 02:30 as standard time
    assert ((both != got) & ~np.isnat(got)).sum() == 2
    np.testing.assert_array_equal(both, localize(stamps, ZONE)[0])


def test_aware_reads_each_series_by_its_own_order_and_names_a_skipped_time() -> None:
    stamps, starts = a_file()
    ids = np.cumsum(starts).astype(str)
    keep = ~np.isin(ids, ["4"])  # the series with the skipped times
    column = pd.Series(stamps[keep], index=np.flatnonzero(keep), name="ds")
    seconds = _aware(column, ZONE, ids[keep]).dt.tz_convert("UTC").astype("int64").to_numpy() // 10**9
    want = localize(stamps[keep], ZONE, starts[keep])[0]
    present = ~np.isnat(want)
    np.testing.assert_array_equal(seconds[present], want[present].astype("int64") // 10**9)
    aware = _aware(column, ZONE, ids[keep])
    assert str(aware.dt.tz) == ZONE and aware.index.equals(column.index)
    with pytest.raises(
        ValueError, match=r"series '4', row 38, column 'ds': 2023-03-26 02:00:00 does not exist"
    ):
        _aware(pd.Series(stamps, name="ds"), ZONE, ids)


def test_a_forecast_after_the_repeat_is_v1s(tmp_path: Path) -> None:
    """a ends on the second 02:00 (standard time), b on the first (summer time): the client's naive
    times and values are /v1's for the rows sent with their explicit-offset start (it read both 02:00 as
    summer time: a's horizon started an hour early)."""
    repository, frame = publish_berlin(tmp_path)
    history = ending_in_the_repeat(frame, {"s0": 1, "s1": 0}, short={"s0": 60, "s1": 60})
    with live_service(repository, tmp_path / "service.log") as service:
        with Client(service.url) as client:
            out = client.forecast(history, model=BERLIN)
        series = []
        for sid, part in history.groupby("unique_id"):
            utc = localize(pd.to_datetime(part["ds"]).to_numpy(), ZONE)[0]
            start = pd.Timestamp(utc[-48]).tz_localize("UTC").isoformat()
            series.append({"id": sid, "values": part["y"].tail(48).tolist(), "start": start})
        r = httpx.post(f"{service.url}/v1/models/{BERLIN}/forecast", json={"series": series})
    assert r.status_code == 200, r.text
    answers = {f["id"]: f for f in r.json()["forecasts"]}
    assert answers["s0"]["timestamps"][0].startswith("2023-10-29T03:00:00+01:00")
    assert answers["s1"]["timestamps"][0].startswith("2023-10-29T02:00:00+01:00")
    for sid, rows in out.groupby("unique_id"):
        want = answers[sid]
        stamps = np.array([np.datetime64(t[:19]) for t in want["timestamps"]], "datetime64[ns]")
        assert (rows["ds"].to_numpy().astype("datetime64[ns]") == stamps).all(), sid
        np.testing.assert_array_equal(rows[BERLIN].to_numpy(), np.asarray(want["forecast"], np.float32)[:, 0])


def test_frames_are_read_in_row_order_then_sorted_by_instant() -> None:
    """Two series of quarter hours through the autumn repeat, in file order, the rows of one between
    the other's: each series' naive times are read in its own row order first, then the frame is sorted
    by the instants (sorting the wall clock first interleaved the two readings of 02:00 ... 02:45)."""
    wall = pd.date_range("2023-10-29 01:30", "2023-10-29 02:45", freq="15min")
    repeat = pd.date_range("2023-10-29 02:00", "2023-10-29 03:15", freq="15min")
    stamps = np.concatenate([wall.to_numpy(), repeat.to_numpy()])  # 01:30 .. 02:45, 02:00 .. 03:15
    one = pd.DataFrame({"unique_id": "a", "ds": stamps, "y": np.arange(len(stamps), dtype=float)})
    frame = pd.concat([one, one.assign(unique_id="b")]).sort_index(kind="stable")  # a, b, a, b, ...
    ordered, instants = _ordered(frame, "unique_id", "ds", ZONE)
    for sid in ("a", "b"):
        mine = (ordered["unique_id"] == sid).to_numpy()
        assert (np.diff(instants[mine].astype("int64")) == 15 * 60 * 10**9).all()
        np.testing.assert_array_equal(ordered["y"].to_numpy()[mine], np.arange(len(stamps)))
