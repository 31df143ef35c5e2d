"""The real `tritonclient.http`, unchanged, against the service: health, metadata, infer with binary and
JSON tensors (and compressed bodies) giving exactly `/v1`'s numbers, and errors as InferenceServerException
with our message."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.app.protocols.conftest import C, H, L, Served, v1_forecast, windows


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[httpclient.InferenceServerClient]:
    c = httpclient.InferenceServerClient(served.host, connection_timeout=10, network_timeout=30)
    yield c
    c.close()


def _input(name: str, array: np.ndarray, datatype: str, binary: bool) -> httpclient.InferInput:
    item = httpclient.InferInput(name, list(array.shape), datatype)
    item.set_data_from_numpy(array, binary_data=binary)
    return item


def test_live_ready_and_server_metadata(client: httpclient.InferenceServerClient) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("plain")
    assert client.is_model_ready("hourly", "1")
    assert "binary_tensor_data" in client.get_server_metadata()["extensions"]


def test_model_metadata_has_the_tensors_with_a_dynamic_batch(
    client: httpclient.InferenceServerClient,
) -> None:
    plain = client.get_model_metadata("plain")
    assert plain["platform"] == "onnxruntime_onnx" and plain["versions"] == ["1"]
    assert plain["inputs"] == [{"name": "window", "datatype": "FP32", "shape": [-1, L, C]}]
    assert plain["outputs"] == [{"name": "forecast", "datatype": "FP32", "shape": [-1, H, C]}]
    hourly = client.get_model_metadata("hourly", "1")
    assert [i["name"] for i in hourly["inputs"]] == ["window", "phase"]
    assert hourly["inputs"][1] == {"name": "phase", "datatype": "INT64", "shape": [-1]}


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_gives_exactly_the_v1_numbers(
    client: httpclient.InferenceServerClient, served: Served, binary: bool
) -> None:
    batch = windows(5, seed=1)
    outputs = None if binary else [httpclient.InferRequestedOutput("forecast", binary_data=False)]
    result = client.infer(
        "plain", [_input("window", batch, "FP32", binary)], outputs=outputs, request_id="req-7"
    )
    got = result.as_numpy("forecast")
    assert got.dtype == np.float32 and got.shape == (5, H, C)
    np.testing.assert_array_equal(got, v1_forecast(served.url, "plain", batch))
    response = result.get_response()
    assert response["id"] == "req-7" and response["model_name"] == "plain"
    assert response["model_version"] == "1"
    assert ("parameters" in response["outputs"][0]) is binary  # binary_data_size only for a binary output


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_compressed_request_bodies(
    client: httpclient.InferenceServerClient, served: Served, compression: str
) -> None:
    batch = windows(3, seed=2)
    result = client.infer(
        "plain", [_input("window", batch, "FP32", True)], request_compression_algorithm=compression
    )
    np.testing.assert_array_equal(result.as_numpy("forecast"), v1_forecast(served.url, "plain", batch))


def test_a_cycle_model_takes_phase_or_start(client: httpclient.InferenceServerClient, served: Served) -> None:
    batch = windows(4, seed=3)
    starts = [datetime(2024, 3, 1, 5, tzinfo=UTC) + timedelta(hours=7 * i) for i in range(4)]
    expected = v1_forecast(served.url, "hourly", batch, starts)
    phase = np.array([s.hour for s in starts], np.int64)  # period 24 of hourly steps: the hour of day
    by_phase = client.infer(
        "hourly", [_input("window", batch, "FP32", True), _input("phase", phase, "INT64", True)]
    )
    np.testing.assert_array_equal(by_phase.as_numpy("forecast"), expected)
    unix = np.array([int(s.timestamp()) for s in starts], np.int64)
    by_start = client.infer(
        "hourly", [_input("window", batch, "FP32", False), _input("start", unix, "INT64", False)]
    )
    np.testing.assert_array_equal(by_start.as_numpy("forecast"), expected)


def test_errors_surface_as_inference_server_exception_with_our_message(
    client: httpclient.InferenceServerClient,
) -> None:
    wrong = np.zeros((2, L + 1, C), np.float32)
    with pytest.raises(InferenceServerException) as info:
        client.infer("plain", [_input("window", wrong, "FP32", True)])
    assert info.value.status() == "400"
    assert (
        f"input 'window' has shape [2, {L + 1}, {C}]; model plain takes [n, {L}, {C}]" in info.value.message()
    )
    with pytest.raises(InferenceServerException) as info:
        client.infer("hourly", [_input("window", np.zeros((1, L, C), np.float32), "FP32", True)])
    assert "give either input 'phase'" in info.value.message()
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata("nope")
    assert info.value.status() == "404" and "model 'nope' not found" in info.value.message()


def test_interval_outputs_are_refused_until_the_model_has_calibrated_intervals(
    client: httpclient.InferenceServerClient,
) -> None:
    with pytest.raises(InferenceServerException) as info:
        client.infer(
            "plain",
            [_input("window", windows(1), "FP32", True)],
            outputs=[httpclient.InferRequestedOutput("forecast_lower")],
        )
    assert info.value.status() == "400" and "no calibrated prediction intervals" in info.value.message()


def test_errors_are_the_protocols_shape(served: Served) -> None:
    r = httpx.post(f"{served.url}/v2/models/plain/infer", content=b"{not json", timeout=10)
    assert r.status_code == 400 and set(r.json()) == {"error"} and "malformed JSON" in r.json()["error"]
    r = httpx.get(f"{served.url}/v2/models/plain/versions/0", timeout=10)
    assert r.status_code == 400 and "positive integer" in r.json()["error"]
    r = httpx.get(f"{served.url}/v2/nothing-here", timeout=10)
    assert r.status_code == 404 and set(r.json()) == {"error"}
