"""OIP v2 REST infer bodies in the parse process: a large JSON body is parsed there and answered exactly
as on the event loop, its errors name the same field; binary tensors (a small JSON header) stay on the
loop. KServe time-series bodies go there too."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.protocols.oip_v2 import codec, handlers, routes
from tests.app.conftest import make_settings, ort_forecast, running_client

L, C = 8, 3
MIN_BYTES = 4096
URL = "/v2/models/toy/versions/1/infer"


@pytest.fixture(scope="module")
def client(toy_repository: Path) -> Iterator[TestClient]:
    with running_client(make_settings(toy_repository, parse_process_min_bytes=MIN_BYTES)) as c:
        yield c


@pytest.fixture
def offloaded(client: TestClient) -> Iterator[list[str]]:
    """The names of the functions the parse process ran, during one test."""
    worker = client.app.state.runtime.parse_process  # type: ignore[attr-defined]
    calls: list[str] = []
    run = worker.run

    async def counted(fn: Any, *args: object) -> Any:
        calls.append(fn.__name__)
        return await run(fn, *args)

    worker.run = counted
    yield calls
    worker.run = run


def _body(x: np.ndarray, data: object = None) -> dict[str, object]:
    tensor = {"name": "window", "datatype": "FP32", "shape": list(x.shape), "data": x.tolist()}
    if data is not None:
        tensor["data"] = data
    return {"inputs": [tensor], "outputs": [{"name": "forecast"}]}


def test_a_large_json_body_is_parsed_in_the_worker_with_the_same_answer(
    client: TestClient, toy_repository: Path, offloaded: list[str]
) -> None:
    x = np.random.default_rng(5).normal(0, 1, (64, L, C)).astype(np.float32)
    r = client.post(URL, json=_body(x))
    assert r.status_code == 200, r.text
    assert offloaded == ["parse_infer"]
    got = np.array(r.json()["outputs"][0]["data"], np.float32).reshape(64, -1, C)
    np.testing.assert_allclose(got, ort_forecast(toy_repository / "toy" / "1" / "model.onnx", x), atol=1e-5)
    small = client.post(URL, json=_body(x[:1]))
    assert small.status_code == 200 and offloaded == ["parse_infer"]  # a small body: on the loop


def test_an_error_in_the_worker_names_its_field(client: TestClient, offloaded: list[str]) -> None:
    x = np.zeros((64, L, C), np.float32)
    data = x.tolist()
    data[3][2][1] = "1.5"
    r = client.post(URL, json=_body(x, data))
    assert offloaded == ["parse_infer"]
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith("inputs[0] (window): FP32 data must be JSON numbers, but data[")


def test_binary_tensors_stay_on_the_loop(client: TestClient, offloaded: list[str]) -> None:
    x = np.random.default_rng(6).normal(0, 1, (256, L, C)).astype(np.float32)
    header = b'{"inputs": [{"name": "window", "datatype": "FP32", "shape": [256, 8, 3], '
    header += b'"parameters": {"binary_data_size": %d}}]}' % x.nbytes
    r = client.post(
        URL,
        content=header + x.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert r.status_code == 200, r.text
    assert len(header + x.tobytes()) >= MIN_BYTES and offloaded == []


def test_a_large_timeseries_body_is_parsed_in_the_worker(client: TestClient, offloaded: list[str]) -> None:
    body = {
        "model": "toy",
        "inputs": [
            {
                "type": "multivariate_time_series",
                "name": f"s{i}",
                "series": np.ones((L, C)).tolist(),
                "frequency": "H",
                "start_timestamp": "2024-01-01T00:00:00",
            }
            for i in range(64)
        ],
        "options": {"horizon": 2},
    }
    r = client.post("/v1/timeseries/forecast", json=body)
    assert offloaded == ["parse_request"]
    assert r.status_code == 200, r.text
    body["inputs"][0]["type"] = "weird"  # type: ignore[index]
    r = client.post("/v1/timeseries/forecast", json=body)  # declined by the worker, the loop's error
    assert r.status_code == 400 and r.json()["error"]["param"] == "inputs[0].type", r.text


def test_a_big_answer_is_encoded_in_a_worker_thread_and_sent_in_pieces_with_the_same_bytes(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46: orjson holds the GIL for a whole call, so a 720-window answer encoded in one call on the
    event loop held /healthz for 0.2-0.7 s (bench.big_bodies). A big answer is encoded in a worker thread,
    in pieces of JSON_CHUNK numbers, and sent piece by piece: the same bytes and headers."""
    x = np.random.default_rng(11).normal(0, 1, (64, L, C)).astype(np.float32)
    whole = client.post(URL, json=_body(x))
    binary_body = {**_body(x), "outputs": [{"name": "forecast", "parameters": {"binary_data": True}}]}
    binary_whole = client.post(URL, json=binary_body)
    assert whole.status_code == 200, whole.text
    threads: list[str] = []
    encode = routes.encode_pieces

    def recorded(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return encode(*args)

    monkeypatch.setattr(routes, "encode_pieces", recorded)
    monkeypatch.setattr(routes, "JSON_CHUNK", 16)  # every answer here is "big"
    monkeypatch.setattr(codec, "JSON_CHUNK", 16)  # and written in pieces of 16 numbers
    bad = x.copy()
    bad[3, 2, 1] = 3e38  # a value past what the model takes: refused, naming it
    refused = client.post(URL, json=_body(bad))
    monkeypatch.setattr(handlers, "BIG_INPUT", 0)  # windows and bounds prepared in a worker thread too
    assert refused.status_code == 400 and "window[3][2][1]" in refused.text, refused.text
    assert client.post(URL, json=_body(bad)).json() == refused.json()
    pieces = client.post(URL, json=_body(x))
    assert pieces.status_code == 200, pieces.text
    assert binary_whole.status_code == 200, binary_whole.text
    binary = client.post(URL, json=binary_body)
    assert binary.content == binary_whole.content and len(threads) == 1  # binary: one buffer, as before
    for header in ("content-length", "content-type", "inference-header-content-length"):
        assert binary.headers[header] == binary_whole.headers[header], header
    assert pieces.content == whole.content
    assert pieces.headers["content-length"] == str(len(whole.content))
    assert pieces.headers["content-type"] == whole.headers["content-type"] == "application/json"
    loop_thread = client.portal.call(lambda: threading.current_thread().name)  # type: ignore[union-attr]
    assert all(name not in ("MainThread", loop_thread) for name in threads), threads
