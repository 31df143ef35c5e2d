"""POST /v1/models/{name}/forecast and /versions/{v}/forecast through the ASGI app."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from tests.app.conftest import engine_of, make_settings, ort_forecast, running_client

L, H, C = 8, 4, 3
CHANNELS = ["HUFL", "MUFL", "OT"]


def _series(seed: int, n: int = L) -> np.ndarray:
    return np.random.default_rng(seed).normal(10, 3, (n, C)).astype(np.float32)


def _post(client: TestClient, body: dict, version: int | None = None, name: str = "toy"):
    path = f"/v1/models/{name}" + ("" if version is None else f"/versions/{version}") + "/forecast"
    return client.post(path, json=body)


def test_rows_match_direct_ort_call_on_latest(client: TestClient, toy_repository: Path) -> None:
    series = [_series(i) for i in range(3)]
    r = _post(client, {"series": [{"id": f"s{i}", "values": s.tolist()} for i, s in enumerate(series)]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["model"], body["version"], body["provider"]) == ("toy", 2, "CPUExecutionProvider")
    expected = ort_forecast(toy_repository / "toy" / "2" / "model.onnx", np.stack(series))
    assert [f["id"] for f in body["forecasts"]] == ["s0", "s1", "s2"]
    for i, f in enumerate(body["forecasts"]):
        assert f["channels"] == CHANNELS
        assert f["timestamps"] is None and "send start" in f["timestamps_note"]
        np.testing.assert_allclose(np.array(f["forecast"]), expected[i], atol=1e-5)


def test_named_columns_equal_rows(client: TestClient, toy_repository: Path) -> None:
    s = _series(7)
    columns = {name: s[:, c].tolist() for c, name in reversed(list(enumerate(CHANNELS)))}  # any key order
    r = _post(client, {"series": [{"values": columns}]})
    assert r.status_code == 200, r.text
    expected = ort_forecast(toy_repository / "toy" / "2" / "model.onnx", s[None])
    np.testing.assert_allclose(np.array(r.json()["forecasts"][0]["forecast"]), expected[0], atol=1e-5)
    assert r.json()["forecasts"][0]["id"] is None


def test_longer_history_uses_the_last_input_length_points(client: TestClient, toy_repository: Path) -> None:
    long = _series(3, n=50)
    r = _post(client, {"series": [{"values": long.tolist()}]})
    assert r.status_code == 200, r.text
    expected = ort_forecast(toy_repository / "toy" / "2" / "model.onnx", long[-L:][None])
    np.testing.assert_allclose(np.array(r.json()["forecasts"][0]["forecast"]), expected[0], atol=1e-5)


def test_shorter_horizon_is_truncated(client: TestClient, toy_repository: Path) -> None:
    s = _series(4)
    r = _post(client, {"series": [{"values": s.tolist(), "start": "2018-06-01T00:00:00"}], "horizon": 2})
    assert r.status_code == 200, r.text
    f = r.json()["forecasts"][0]
    expected = ort_forecast(toy_repository / "toy" / "2" / "model.onnx", s[None])[0, :2]
    np.testing.assert_allclose(np.array(f["forecast"]), expected, atol=1e-5)
    assert len(f["timestamps"]) == 2


@pytest.mark.parametrize("version", [1, 2])
def test_explicit_version(client: TestClient, toy_repository: Path, version: int) -> None:
    s = _series(5)
    r = _post(client, {"series": [{"values": s.tolist()}]}, version=version)
    assert r.status_code == 200, r.text
    assert r.json()["version"] == version
    expected = ort_forecast(toy_repository / "toy" / str(version) / "model.onnx", s[None])
    np.testing.assert_allclose(np.array(r.json()["forecasts"][0]["forecast"]), expected[0], atol=1e-5)


def test_versions_really_differ(client: TestClient) -> None:
    body = {"series": [{"values": _series(6).tolist()}]}
    v1 = _post(client, body, version=1).json()["forecasts"][0]["forecast"]
    v2 = _post(client, body, version=2).json()["forecasts"][0]["forecast"]
    assert not np.allclose(v1, v2)


def test_timestamps_continue_after_the_last_value(client: TestClient) -> None:
    n = 11
    start = datetime(2018, 6, 1)
    r = _post(client, {"series": [{"values": _series(8, n).tolist(), "start": start.isoformat()}]})
    assert r.status_code == 200, r.text
    stamps = r.json()["forecasts"][0]["timestamps"]
    assert "timestamps_note" not in r.json()["forecasts"][0]
    # a naive start is UTC, said explicitly in the answer (RFC 3339 date-times carry an offset)
    assert stamps == [(start + timedelta(hours=n + k)).isoformat() + "Z" for k in range(H)]
    assert stamps[0] == "2018-06-01T11:00:00Z"


def test_timestamps_keep_the_timezone(client: TestClient) -> None:
    r = _post(client, {"series": [{"values": _series(8).tolist(), "start": "2018-06-01T00:00:00+02:00"}]})
    assert r.json()["forecasts"][0]["timestamps"][0] == "2018-06-01T08:00:00+02:00"


def test_concurrent_requests_are_merged_and_split_back(toy_repository: Path) -> None:
    settings = make_settings(toy_repository, max_batch_wait_ms=20.0, max_batch_rows=256)
    n_clients = 32
    rng = np.random.default_rng(0)
    # Distinct series per client, and a varying number of series per request.
    requests = [rng.normal(0, 5, (1 + i % 3, L, C)).astype(np.float32) for i in range(n_clients)]
    with running_client(settings) as client:
        batcher = engine_of(client).get("toy", 2).batcher
        assert batcher is not None
        calls_before = batcher.stats.session_calls

        def call(i: int) -> tuple[int, dict]:
            body = {"series": [{"id": f"c{i}-{j}", "values": w.tolist()} for j, w in enumerate(requests[i])]}
            r = _post(client, body)
            return r.status_code, r.json()

        with ThreadPoolExecutor(max_workers=n_clients) as pool:
            results = list(pool.map(call, range(n_clients)))
        calls = batcher.stats.session_calls - calls_before
    assert calls < n_clients, f"{calls} session calls for {n_clients} concurrent requests: nothing merged"
    model = toy_repository / "toy" / "2" / "model.onnx"
    for i, (status, body) in enumerate(results):
        assert status == 200, body
        assert [f["id"] for f in body["forecasts"]] == [f"c{i}-{j}" for j in range(len(requests[i]))]
        expected = ort_forecast(model, requests[i])
        np.testing.assert_allclose(np.array([f["forecast"] for f in body["forecasts"]]), expected, atol=1e-5)


def _split_in_calls_of_five(toy_repository: Path, settings: Settings, seed: int) -> list[dict]:
    """23 series in one request: answered in ceil(23 / 5) = 5 calls of at most 5 rows, as from one call;
    the versions as `GET /v1/models/toy` describes them afterwards."""
    windows = np.random.default_rng(seed).normal(0, 1, (23, L, C)).astype(np.float32)
    with running_client(settings) as client:
        batcher = engine_of(client).get("toy", 2).batcher
        assert batcher is not None
        before = batcher.stats.session_calls
        r = _post(client, {"series": [{"values": w.tolist()} for w in windows]})
        assert r.status_code == 200, r.text
        assert batcher.stats.session_calls - before == 5
        assert max(batcher.stats.batch_rows) == 5
        described = client.get("/v1/models/toy").json()["versions"]
    expected = ort_forecast(toy_repository / "toy" / "2" / "model.onnx", windows)
    got = np.array([f["forecast"] for f in r.json()["forecasts"]])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    return described


def test_request_larger_than_max_batch_rows_is_split(toy_repository: Path) -> None:
    _split_in_calls_of_five(toy_repository, make_settings(toy_repository, max_batch_rows=5), seed=1)


def test_rows_per_call_are_capped_by_attention_memory(toy_repository: Path) -> None:
    # RSA_CALL_ATTENTION_MIB for 5.5 series of the toy's attention ([C=3, N=1, Hh=2, L, L] float32):
    # calls of at most 5 rows, whatever RSA_MAX_BATCH_ROWS allows, and the answer as from one call.
    per_series = C * 1 * 2 * L * L * 4
    settings = make_settings(toy_repository, max_batch_rows=256, call_attention_mib=5.5 * per_series / 2**20)
    described = _split_in_calls_of_five(toy_repository, settings, seed=2)
    assert [v["batching"]["max_series_per_call"] for v in described] == [5, 5]


def test_rows_per_call_are_at_least_one(toy_repository: Path) -> None:
    with running_client(make_settings(toy_repository, call_attention_mib=1e-9)) as client:
        batcher = engine_of(client).get("toy", 2).batcher
        assert batcher is not None and batcher.max_batch_rows == 1
        windows = np.random.default_rng(3).normal(0, 1, (3, L, C)).astype(np.float32)
        r = _post(client, {"series": [{"values": w.tolist()} for w in windows]})
        assert r.status_code == 200, r.text
    expected = ort_forecast(toy_repository / "toy" / "2" / "model.onnx", windows)
    np.testing.assert_allclose(np.array([f["forecast"] for f in r.json()["forecasts"]]), expected, atol=1e-5)
