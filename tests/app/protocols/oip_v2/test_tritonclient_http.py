"""The real `tritonclient.http`, unchanged, against the service: health, metadata, infer with binary and
JSON tensors (and compressed bodies) giving exactly `/v1`'s numbers, the shipped model's interval outputs
giving exactly `/v1`'s `level` bounds, and errors as InferenceServerException with our message."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.app.protocols.conftest import C, H, L, Served, shipped_windows, v1_answer, v1_forecast, windows


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
    # the limits a client sizes and paces its requests by (rsa_client's ModelLimits)
    assert set(plain["parameters"]) == {
        "max_series_per_request",
        "max_body_bytes",
        "max_evaluations_in_flight",
    }
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


def _levels(served: Served) -> list[float]:
    """The shipped model's calibrated levels, as `/v1` lists them for its latest version."""
    versions = httpx.get(f"{served.url}/v1/models/etth1-rsa", timeout=10).json()["versions"]
    return max(versions, key=lambda v: v["version"])["intervals"]["levels"]


def test_metadata_lists_an_interval_output_per_bound_and_calibrated_level(
    client: httpclient.InferenceServerClient, served: Served
) -> None:
    meta = client.get_model_metadata("etth1-rsa")
    (shape,) = {tuple(o["shape"]) for o in meta["outputs"]}
    assert shape[0] == -1 and {o["datatype"] for o in meta["outputs"]} == {"FP32"}
    names = ["forecast"] + [f"forecast_{b}_{level:g}" for level in _levels(served) for b in ("lo", "hi")]
    assert [o["name"] for o in meta["outputs"]] == names and "forecast_lo_80" in names


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_interval_outputs_are_the_v1_level_bounds(
    client: httpclient.InferenceServerClient, served: Served, binary: bool
) -> None:
    batch, starts = shipped_windows(3, seed=4)
    unix = np.array([int(s.timestamp()) for s in starts], np.int64)
    names = ["forecast_hi_95", "forecast", "forecast_lo_80", "forecast_hi_80"]  # any order, any subset
    result = client.infer(
        "etth1-rsa",
        [_input("window", batch, "FP32", binary), _input("start", unix, "INT64", binary)],
        outputs=[httpclient.InferRequestedOutput(name, binary_data=binary) for name in names],
    )
    assert [o["name"] for o in result.get_response()["outputs"]] == names
    v1 = v1_answer(served.url, "etth1-rsa", batch, starts, level=[80, 95])
    for name, key in zip(names, ["hi-95", "forecast", "lo-80", "hi-80"], strict=True):
        got = result.as_numpy(name)
        assert got.dtype == np.float32 and got.shape == v1[key].shape
        np.testing.assert_array_equal(got, v1[key], err_msg=name)
    assert (result.as_numpy("forecast_lo_80") < result.as_numpy("forecast")).all()


def test_no_output_named_answers_every_output_of_the_model(
    client: httpclient.InferenceServerClient, served: Served
) -> None:
    batch, starts = shipped_windows(2, seed=5)
    phase = np.array([s.hour for s in starts], np.int64)
    result = client.infer(
        "etth1-rsa", [_input("window", batch, "FP32", True), _input("phase", phase, "INT64", True)]
    )
    listed = [o["name"] for o in client.get_model_metadata("etth1-rsa")["outputs"]]
    assert [o["name"] for o in result.get_response()["outputs"]] == listed
    levels = _levels(served)
    v1 = v1_answer(served.url, "etth1-rsa", batch, starts, level=levels)
    for level in levels:
        for bound in ("lo", "hi"):
            got = result.as_numpy(f"forecast_{bound}_{level:g}")
            np.testing.assert_array_equal(got, v1[f"{bound}-{level:g}"])


def test_a_big_json_answer_sent_in_pieces_reads_as_the_binary_one(
    client: httpclient.InferenceServerClient,
) -> None:
    """Issue 46: an answer of more than 65,536 JSON numbers (here 10 windows x 96 steps x 7 channels x the
    forecast and its bounds) is encoded in pieces and streamed with its Content-Length; tritonclient reads
    it, and every output equals the binary answer's."""
    batch, starts = shipped_windows(10, seed=6)
    phase = np.array([s.hour for s in starts], np.int64)
    inputs = [_input("window", batch, "FP32", False), _input("phase", phase, "INT64", False)]
    names = [o["name"] for o in client.get_model_metadata("etth1-rsa")["outputs"]]
    as_json = client.infer(
        "etth1-rsa", inputs, outputs=[httpclient.InferRequestedOutput(n, binary_data=False) for n in names]
    )
    as_binary = client.infer(
        "etth1-rsa", inputs, outputs=[httpclient.InferRequestedOutput(n, binary_data=True) for n in names]
    )
    assert sum(as_json.as_numpy(n).size for n in names) > 65_536
    for name in names:
        np.testing.assert_array_equal(as_json.as_numpy(name), as_binary.as_numpy(name))


def test_unknown_or_uncalibrated_interval_outputs_are_a_400_with_our_message(
    client: httpclient.InferenceServerClient,
) -> None:
    with pytest.raises(InferenceServerException) as info:
        client.infer(
            "plain",
            [_input("window", windows(1), "FP32", True)],
            outputs=[httpclient.InferRequestedOutput("forecast_lo_80")],
        )
    assert info.value.status() == "400"
    message = info.value.message()
    assert "outputs[0] (forecast_lo_80): this model version has no prediction intervals" in message
    batch, starts = shipped_windows(1)
    inputs = [
        _input("window", batch, "FP32", True),
        _input("start", np.array([int(starts[0].timestamp())], np.int64), "INT64", True),
    ]
    for name in ("forecast_lo_85", "forecast_median"):
        with pytest.raises(InferenceServerException) as info:
            client.infer(
                "etth1-rsa",
                inputs,
                outputs=[httpclient.InferRequestedOutput("forecast"), httpclient.InferRequestedOutput(name)],
            )
        assert info.value.status() == "400"
        message = info.value.message()
        assert f"outputs[1]: '{name}' is not an output of model etth1-rsa" in message
        assert "'forecast_lo_80', 'forecast_hi_80'" in message  # the outputs it has


def test_errors_are_the_protocols_shape(served: Served) -> None:
    r = httpx.post(f"{served.url}/v2/models/plain/infer", content=b"{not json", timeout=10)
    assert r.status_code == 400 and set(r.json()) == {"error"} and "malformed JSON" in r.json()["error"]
    r = httpx.get(f"{served.url}/v2/models/plain/versions/0", timeout=10)
    assert r.status_code == 400 and "positive integer" in r.json()["error"]
    r = httpx.get(f"{served.url}/v2/nothing-here", timeout=10)
    assert r.status_code == 404 and set(r.json()) == {"error"}
