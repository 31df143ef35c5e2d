"""The real `tritonclient.grpc`, unchanged, against the service's gRPC port (same process as HTTP): health,
metadata, infer with raw tensors giving exactly `/v1`'s numbers (the shipped model's interval outputs its
`level` bounds), errors as InferenceServerException with our message, and the calls in the metrics under
their own protocol."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.app.metrics_scrape import value
from tests.app.protocols.conftest import C, H, L, Served, shipped_windows, v1_answer, v1_forecast, windows


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[grpcclient.InferenceServerClient]:
    c = grpcclient.InferenceServerClient(served.grpc_target)
    yield c
    c.close()


def _input(name: str, array: np.ndarray, datatype: str) -> grpcclient.InferInput:
    item = grpcclient.InferInput(name, list(array.shape), datatype)
    item.set_data_from_numpy(array)  # raw_input_contents, as the client always sends
    return item


def test_live_ready_and_metadata(client: grpcclient.InferenceServerClient) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("plain") and client.is_model_ready("hourly", "1")
    assert "binary_tensor_data" in client.get_server_metadata(as_json=True)["extensions"]
    meta = client.get_model_metadata("plain", as_json=True)
    assert meta["platform"] == "onnxruntime_onnx" and meta["versions"] == ["1"]
    # as_json writes int64 fields as strings (protobuf's JSON mapping)
    assert meta["inputs"] == [{"name": "window", "datatype": "FP32", "shape": ["-1", str(L), str(C)]}]
    assert meta["outputs"] == [{"name": "forecast", "datatype": "FP32", "shape": ["-1", str(H), str(C)]}]


def test_infer_gives_exactly_the_v1_numbers(client: grpcclient.InferenceServerClient, served: Served) -> None:
    batch = windows(6, seed=11)
    result = client.infer("plain", [_input("window", batch, "FP32")], request_id="g-1")
    got = result.as_numpy("forecast")
    assert got.dtype == np.float32 and got.shape == (6, H, C)
    np.testing.assert_array_equal(got, v1_forecast(served.url, "plain", batch))
    response = result.get_response()
    assert (response.id, response.model_name, response.model_version) == ("g-1", "plain", "1")

    starts = [datetime(2024, 5, 2, 23, tzinfo=UTC) + timedelta(hours=5 * i) for i in range(3)]
    cyc = windows(3, seed=12)
    phase = np.array([s.hour for s in starts], np.int64)
    result = client.infer("hourly", [_input("window", cyc, "FP32"), _input("phase", phase, "INT64")])
    np.testing.assert_array_equal(result.as_numpy("forecast"), v1_forecast(served.url, "hourly", cyc, starts))


def test_errors_surface_as_inference_server_exception_with_our_message(
    client: grpcclient.InferenceServerClient,
) -> None:
    with pytest.raises(InferenceServerException) as info:
        client.infer("plain", [_input("window", np.zeros((1, L, C + 1), np.float32), "FP32")])
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert f"model plain takes [n, {L}, {C}]" in info.value.message()
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata("nope")
    assert info.value.status() == "StatusCode.NOT_FOUND" and "model 'nope' not found" in info.value.message()
    with pytest.raises(InferenceServerException) as info:
        client.infer(
            "plain",
            [_input("window", windows(1), "FP32")],
            outputs=[grpcclient.InferRequestedOutput("forecast_hi_80")],
        )
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "this model version has no prediction intervals" in info.value.message()


@pytest.mark.parametrize("version", ["²", "1²", "٣"])
def test_a_version_that_is_not_ascii_digits_is_invalid_argument(
    client: grpcclient.InferenceServerClient, version: str
) -> None:
    # "²".isdigit() is True but int("²") raises: that was INTERNAL
    for call in (client.is_model_ready, client.get_model_metadata):
        with pytest.raises(InferenceServerException) as info:
            call("plain", version)
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT", info.value
        assert "model version must be a positive integer" in info.value.message()


def test_typed_contents_beside_raw_input_contents_is_invalid_argument(served: Served) -> None:
    # Triton refuses it too: which of the two would be the tensor is ambiguous
    request = service_pb2.ModelInferRequest(model_name="plain")
    item = request.inputs.add(name="window", datatype="FP32", shape=[1, L, C])
    item.contents.fp32_contents.extend([1.0] * (L * C))
    request.raw_input_contents.append(np.zeros((1, L, C), np.float32).tobytes())
    with grpc.insecure_channel(served.grpc_target) as channel, pytest.raises(grpc.RpcError) as info:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "inputs[0] (window): give `contents` or raw_input_contents, not both" in str(info.value.details())


def test_interval_outputs_are_listed_and_are_the_v1_level_bounds(
    client: grpcclient.InferenceServerClient, served: Served
) -> None:
    outputs = client.get_model_metadata("etth1-rsa", as_json=True)["outputs"]
    names = [o["name"] for o in outputs]
    assert names[0] == "forecast" and {"forecast_lo_80", "forecast_hi_80", "forecast_lo_95"} <= set(names)
    assert {o["datatype"] for o in outputs} == {"FP32"} and {o["shape"][0] for o in outputs} == {"-1"}
    batch, starts = shipped_windows(4, seed=13)
    phase = np.array([s.hour for s in starts], np.int64)
    asked = ["forecast_lo_95", "forecast_hi_95", "forecast"]
    result = client.infer(
        "etth1-rsa",
        [_input("window", batch, "FP32"), _input("phase", phase, "INT64")],
        outputs=[grpcclient.InferRequestedOutput(name) for name in asked],
    )
    assert [o.name for o in result.get_response().outputs] == asked
    v1 = v1_answer(served.url, "etth1-rsa", batch, starts, level=[95])
    for name, key in zip(asked, ["lo-95", "hi-95", "forecast"], strict=True):
        got = result.as_numpy(name)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, v1[key], err_msg=name)


def test_grpc_calls_are_in_the_metrics_with_their_protocol(
    client: grpcclient.InferenceServerClient, served: Served
) -> None:
    def scrape() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        text = httpx.get(f"{served.url}/metrics", timeout=10).text
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    infer = {
        "endpoint": "/inference.GRPCInferenceService/ModelInfer",
        "protocol": "oip_v2_grpc",
        "model": "plain",
        "version": "1",
    }
    before = scrape()
    client.infer("plain", [_input("window", windows(2), "FP32")])
    with pytest.raises(InferenceServerException):
        client.infer("plain", [_input("window", np.zeros((1, L + 2, C), np.float32), "FP32")])
    after = scrape()
    for name, labels in (
        ("rsa_requests_total", {**infer, "code": "OK"}),
        ("rsa_requests_total", {**infer, "code": "INVALID_ARGUMENT"}),
        ("rsa_request_rejections_total", {**infer, "reason": "invalid_input"}),
    ):
        assert value(after, name, **labels) - value(before, name, **labels) == 1, (name, labels)
