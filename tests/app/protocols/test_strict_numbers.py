"""Counts are JSON integers in every protocol (issue 32): `"3"` and `true` where a horizon, a layer, a
channel index or a tensor dimension belongs are refused naming the field, never read as 3 or 1; valid
requests are answered as before (3.0 is still 3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

L, C, H = 8, 3, 4
NOT_COUNTS = ["3", "1", True, False]


def window() -> list[list[float]]:
    return np.random.default_rng(0).normal(10, 2, (L, C)).round(3).tolist()


def forecast(client: TestClient, horizon: Any) -> Any:
    return client.post("/v1/models/toy/forecast", json={"series": [{"values": window()}], "horizon": horizon})


@pytest.mark.parametrize("horizon", NOT_COUNTS)
def test_v1_horizon(client: TestClient, horizon: Any) -> None:
    r = forecast(client, horizon)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "horizon" and "valid integer" in error["message"], error


def test_v1_valid_horizons_answer_as_before(client: TestClient) -> None:
    three = forecast(client, 3)
    assert three.status_code == 200, three.text
    assert len(three.json()["forecasts"][0]["forecast"]) == 3
    assert forecast(client, 3.0).json()["forecasts"] == three.json()["forecasts"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [({"layers": ["0"]}, "layers[0]"), ({"layers": [True]}, "layers[0]"), ({"channel": True}, "channel")],
)
def test_v1_attention_counts(client: TestClient, extra: dict[str, Any], field: str) -> None:
    r = client.post("/v1/models/toy/attention", json={"series": {"values": window()}, **extra})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"].startswith(field), error


def test_v1_attention_channel_names_still_count(client: TestClient) -> None:
    for channel in ("OT", 2):
        r = client.post("/v1/models/toy/attention", json={"series": {"values": window()}, "channel": channel})
        assert r.status_code == 200, r.text
        assert r.json()["channel"]["name"] == "OT"


def timeseries(horizon: Any) -> dict[str, Any]:
    return {
        "model": "toy",
        "inputs": [
            {
                "type": "multivariate_time_series",
                "name": "a",
                "series": window(),
                "frequency": "1h",
                "start_timestamp": "2025-06-05T13:00:00Z",
            }
        ],
        "options": {"horizon": horizon},
    }


@pytest.mark.parametrize("horizon", NOT_COUNTS)
def test_kserve_timeseries_horizon(client: TestClient, horizon: Any) -> None:
    r = client.post("/v1/timeseries/forecast", json=timeseries(horizon))
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "options.horizon" and "valid integer" in error["message"], error
    assert client.post("/v1/timeseries/forecast", json=timeseries(2)).status_code == 200


@pytest.mark.parametrize("dimension", NOT_COUNTS)
def test_oip_v2_shape(client: TestClient, dimension: Any) -> None:
    body = {"inputs": [{"name": "window", "shape": [dimension, L, C], "datatype": "FP32", "data": window()}]}
    r = client.post("/v2/models/toy/infer", json=body)
    assert r.status_code == 400, r.text
    assert "shape" in r.json()["error"] and "valid integer" in r.json()["error"], r.text
    body["inputs"][0]["shape"] = [1, L, C]
    assert client.post("/v2/models/toy/infer", json=body).status_code == 200


@pytest.mark.parametrize(("where", "value"), [("series", "1.5"), ("series", True), ("quantiles", "0.5")])
def test_kserve_timeseries_numbers(client: TestClient, where: str, value: Any) -> None:
    body = timeseries(2)
    if where == "series":
        body["inputs"][0]["series"][0][0] = value
    else:
        body["options"]["quantiles"] = [value]
    r = client.post("/v1/timeseries/forecast", json=body)
    assert r.status_code == 400, r.text
    assert "valid number" in r.json()["error"]["message"], r.text
