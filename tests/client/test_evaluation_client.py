"""The client's `cross_validation` and `detect_anomalies` against a real service process (a limit of 3
forecasts a request: a backtest of 3 cutoffs takes one request per series, an anomaly check of 7 rows
three pieces), each checked against /v1's own answer for the same history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from rsa_client import Client, ServiceError

from tests.app.conftest import make_settings, running_client
from tests.client.conftest import CHANNELS, etth1_long


def v1(service: Any, route: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(f"{service.url}/v1/models/etth1-rsa/{route}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def series_body(part: pd.DataFrame) -> dict[str, Any]:
    part = part.sort_values("ds")
    return {
        "id": str(part["unique_id"].iloc[0]),
        "values": part[CHANNELS].to_numpy(np.float64).tolist(),
        "start": part["ds"].iloc[0].tz_localize("UTC").isoformat(),
    }


def test_cross_validation_is_v1s_backtest_of_each_series(service: Any) -> None:
    frame = etth1_long(2, seed=4)  # 648 and 677 rows: three cutoffs 12 apart after 512 rows fit
    with Client(service.url, concurrency=1) as client:
        out = client.cross_validation(frame, h=24, n_windows=3, step_size=12, level=[80])
    assert list(out.columns[:4]) == ["unique_id", "ds", "cutoff", "HUFL"]
    assert {"etth1-rsa-OT", "etth1-rsa-OT-lo-80", "etth1-rsa-OT-hi-80"} <= set(out.columns)
    assert len(out) == 2 * 3 * 24
    points = []
    for sid, part in frame.groupby("unique_id"):
        part = part.sort_values("ds").reset_index(drop=True)
        body = {"series": [series_body(part)], "horizon": 24, "n_windows": 3, "step_size": 12, "level": [80]}
        answer = v1(service, "cross_validation", body)["series"][0]
        got = out[out["unique_id"] == sid]
        for j, window in enumerate(answer["windows"]):
            rows = got.iloc[j * 24 : (j + 1) * 24]
            t = window["cutoff"]
            assert (rows["cutoff"] == part["ds"].iloc[t - 1]).all()
            assert list(rows["ds"]) == list(part["ds"].iloc[t : t + 24])
            np.testing.assert_array_equal(rows["OT"].to_numpy(), part["OT"].to_numpy()[t : t + 24])
            want = np.array(window["forecast"], np.float32)[:, CHANNELS.index("OT")]
            np.testing.assert_array_equal(rows["etth1-rsa-OT"].to_numpy(np.float32), want)
            lo = np.array(window["lo-80"], np.float32)[:, CHANNELS.index("OT")]
            np.testing.assert_array_equal(rows["etth1-rsa-OT-lo-80"].to_numpy(np.float32), lo)
        assert out.attrs["series_metrics"][sid] == answer["metrics"]
        points.append(answer["metrics"])
    pooled = out.attrs["metrics"]
    total = sum(m["points"] for m in points)
    assert pooled["points"] == total
    assert pooled["mae"] == pytest.approx(sum(m["mae"] * m["points"] for m in points) / total, rel=1e-12)


def test_detect_anomalies_in_pieces_answers_as_the_whole_series(service: Any) -> None:
    """7 rows checked under a limit of 3 a request: pieces of 3, 3 and 1 rows, each sent with only the
    rows its windows read; each piece's answer is /v1's for the whole history up to the piece's end
    (exactly: the same windows in a call of the same size)."""
    frame = etth1_long(1, seed=6)
    part = frame.sort_values("ds").reset_index(drop=True)
    n = len(part)
    # One request at a time, so the service's batcher cannot merge two: every value is /v1's exactly.
    with Client(service.url, concurrency=1) as client:
        out = client.detect_anomalies(frame, level=99, last=7)
    assert len(out) == 7 and list(out["ds"]) == list(part["ds"].iloc[n - 7 :])
    assert {"etth1-rsa-OT", "etth1-rsa-OT-lo-99", "etth1-rsa-OT-hi-99", "OT-anomaly", "OT-score"} <= set(out)
    for end, size in ((n - 4, 3), (n - 1, 3), (n, 1)):  # pieces from the first row checked on
        body = {"series": [series_body(part.iloc[:end])], "level": 99, "last": size}
        answer = v1(service, "detect_anomalies", body)["series"][0]
        rows = out[out["ds"].isin(part["ds"].iloc[end - size : end])]
        c = CHANNELS.index("OT")
        np.testing.assert_array_equal(
            rows["etth1-rsa-OT"].to_numpy(np.float32), np.array(answer["forecast"], np.float32)[:, c]
        )
        np.testing.assert_array_equal(rows["OT-score"].to_numpy(), np.array(answer["score"])[:, c])
        assert rows["OT-anomaly"].tolist() == [a[c] for a in answer["anomaly"]]


def test_a_repaired_check_in_pieces_reads_the_spikes_earlier_pieces_replaced(
    service: Any, repository: Path
) -> None:
    """9 rows checked under a limit of 3 a request, spikes in the first two pieces' middle rows: each
    piece is sent with the values the service replaced before it as their forecasts (the answers'
    `replaced`), so its windows read what one request of all 9 rows reads. Sent as they are, the next
    pieces' windows held the spikes: forecasts off by far more than the tolerance, the spread that scales
    the intervals too."""
    frame = etth1_long(1, seed=7)
    part = frame.sort_values("ds").reset_index(drop=True)
    n = len(part)
    c = CHANNELS.index("OT")
    for row, jump in ((n - 8, 100.0), (n - 5, -100.0)):
        frame.loc[frame["ds"] == part["ds"].iloc[row], "OT"] += jump
    part = frame.sort_values("ds").reset_index(drop=True)
    with Client(service.url, concurrency=1) as client:
        out = client.detect_anomalies(frame, level=99, last=9)
    with running_client(make_settings(repository, max_series_per_request=64)) as whole:
        body = {"series": [series_body(part)], "level": 99, "last": 9}
        r = whole.post("/v1/models/etth1-rsa/detect_anomalies", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()["series"][0]
    assert np.array(answer["replaced"])[[1, 4], c].all()  # both spikes replaced in the whole check
    # one request forecasts its windows in other batches than the pieces: float32 rounding apart
    for column, key in (("etth1-rsa", "forecast"), ("score", "score")):
        got = np.stack(
            [out[f"{name}-{column}" if column == "score" else f"{column}-{name}"] for name in CHANNELS], 1
        )
        np.testing.assert_allclose(got, np.array(answer[key], np.float64), rtol=2e-4, atol=1e-4)
    flags = np.stack([out[f"{name}-anomaly"].to_numpy() for name in CHANNELS], 1)
    assert flags.tolist() == answer["anomaly"]
    assert flags[[1, 4], c].all() and flags.sum() == np.array(answer["anomaly"]).sum()


def test_a_spike_is_flagged_and_a_refusal_names_the_field(service: Any) -> None:
    frame = etth1_long(1, seed=5)
    last = frame["ds"].idxmax()
    frame.loc[last, "OT"] += 100.0  # far outside any calibrated width of OT
    with Client(service.url) as client:
        out = client.detect_anomalies(frame, level=99, last=1)
        assert bool(out["OT-anomaly"].iloc[0]) and out["OT-score"].iloc[0] > 5
        with pytest.raises(ServiceError) as caught:
            client.detect_anomalies(frame, level=85, last=1)
    assert caught.value.status == 422 and '"field": "level"' in caught.value.message


def test_calls_without_a_model_use_the_one_served(service: Any) -> None:
    """Issue 45, item 8: `model=` is needed only where the service serves several (this one serves
    etth1-rsa alone): `forecast` without it is the named model's forecast, not the pretrained route."""
    frame = etth1_long(1, seed=4)
    with Client(service.url, concurrency=1) as client:
        assert client.served() == ["etth1-rsa"]
        unnamed = client.forecast(frame, level=[80])
        named = client.forecast(frame, level=[80], model="etth1-rsa")
    pd.testing.assert_frame_equal(unnamed, named)
