"""A covariate model (issue 36) over OIP v2 gRPC: the real `tritonclient.grpc` sends a window with its
`lengths`, `future_<name>`, `past_<name>`, `static_<name>` and `start` tensors as raw contents to a real
`python -m app`, and gets exactly `/v1`'s numbers for the same series; a missing or wrong-shaped covariate
answers INVALID_ARGUMENT naming the input. The model: tests/export/test_covariates_served.py's shops,
trained and exported through the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from bench.loadgen import free_port
from export.global_models.model import GlobalModel
from tests.app.live import live_service
from tests.export.test_covariates_served import DAYS, H, request_series, write_shops
from tests.utils.shops import publish_shops

NAME = "shops"


@dataclass(frozen=True)
class Shops:
    url: str
    target: str
    client: grpcclient.InferenceServerClient
    model: GlobalModel
    shops: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def shops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shops]:
    folder = tmp_path_factory.mktemp("grpc_covariates")
    publish_shops(folder, n=10, short=False)  # trained once per process (tests/utils/shops.py), as NAME
    written = write_shops(folder / "shops.csv")  # the same file again, for its series
    model_file = folder / "run" / "model.json"
    grpc_port = free_port()
    with live_service(folder / "repo", folder / "service.log", RSA_GRPC_PORT=str(grpc_port)) as service:
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        try:
            yield Shops(service.url, f"127.0.0.1:{grpc_port}", client, GlobalModel.load(model_file), written)
        finally:
            client.close()


def _input(name: str, array: np.ndarray, datatype: str) -> grpcclient.InferInput:
    item = grpcclient.InferInput(name, list(array.shape), datatype)
    item.set_data_from_numpy(array)  # raw_input_contents, as the client always sends
    return item


def _arrays(shops: Shops, n: int) -> dict[str, np.ndarray]:
    """shop_0 after n days, and shop_1 as a 10-day history (`lengths`), as named tensors."""
    L = shops.model.input_length
    s0, s1 = shops.shops["shop_0"], shops.shops["shop_1"]
    window = np.stack([s0["y"][n - L : n], s1["y"][n - L : n]]).astype(np.float32)
    past = np.stack([s0["footfall"][n - L : n], s1["footfall"][n - L : n]]).astype(np.float32)
    window[1, : L - 10] = 0.0  # before shop_1's start: ignored, as `lengths` says
    past[1, : L - 10] = 0.0
    future = np.stack([s0["promo"][n : n + H], s1["promo"][n : n + H]]).astype(np.float32)
    assert shops.model.covariates is not None
    categories = shops.model.covariates.static[0].categories
    assert categories is not None
    return {
        "window": window,
        "lengths": np.array([L, 10], np.int64),
        "future_promo": future,
        "past_footfall": past,
        "static_size": np.array([categories.index(s0["size"]), categories.index(s1["size"])], np.int64),
        "start": np.array([int(s["stamps"][n - L].timestamp()) for s in (s0, s1)], np.int64),
    }


def _inputs(shops: Shops, n: int) -> dict[str, grpcclient.InferInput]:
    return {
        k: _input(k, a, "FP32" if a.dtype == np.float32 else "INT64") for k, a in _arrays(shops, n).items()
    }


def _v1(shops: Shops, n: int) -> np.ndarray:
    s0, s1 = shops.shops["shop_0"], shops.shops["shop_1"]
    body = {"series": [request_series(s0, "a", n), request_series(s1, "b", n, n - 10)]}
    r = httpx.post(f"{shops.url}/v1/models/{NAME}/forecast", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return np.array([f["forecast"] for f in r.json()["forecasts"]], np.float32)[:, :, 0]


def test_grpc_metadata_lists_the_covariate_inputs(shops: Shops) -> None:
    meta = shops.client.get_model_metadata(NAME, as_json=True)
    names = {t["name"]: t for t in meta["inputs"]}
    assert set(names) >= {"window", "future_promo", "past_footfall", "static_size", "start"}
    assert names["future_promo"]["shape"] == ["-1", str(H)]  # as_json writes int64 fields as strings
    assert names["static_size"]["datatype"] == "INT64"


def test_grpc_covariates_give_the_v1_numbers(shops: Shops) -> None:
    n = DAYS - H
    result = shops.client.infer(NAME, list(_inputs(shops, n).values()), request_id="cov-1")
    got = result.as_numpy("forecast")
    assert got.dtype == np.float32 and got.shape[:2] == (2, H)
    np.testing.assert_allclose(got.reshape(2, H), _v1(shops, n), rtol=1e-5, atol=1e-4)
    # the promotions reach the model: flipping them moves the forecast
    flipped = _inputs(shops, n)
    promo = np.stack([shops.shops[s]["promo"][n : n + H] for s in ("shop_0", "shop_1")]).astype(np.float32)
    flipped["future_promo"] = _input("future_promo", 1 - promo, "FP32")
    again = shops.client.infer(NAME, list(flipped.values())).as_numpy("forecast").reshape(2, H)
    assert np.abs(again - got.reshape(2, H)).max() > 1.0


def test_grpc_typed_contents_give_the_same_numbers(shops: Shops) -> None:
    """The same tensors as typed `contents` (fp32_contents, int64_contents) instead of raw bytes."""
    n = DAYS - H
    request = service_pb2.ModelInferRequest(model_name=NAME)
    for name, array in _arrays(shops, n).items():
        typed = array.dtype == np.float32
        tensor = request.inputs.add(name=name, datatype="FP32" if typed else "INT64", shape=array.shape)
        contents = tensor.contents.fp32_contents if typed else tensor.contents.int64_contents
        contents.extend(array.ravel().tolist())
    with grpc.insecure_channel(shops.target) as channel:
        response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=30)
    (output,) = [o for o in response.outputs if o.name == "forecast"]
    at = [o.name for o in response.outputs].index("forecast")
    got = np.frombuffer(response.raw_output_contents[at], np.float32).reshape(list(output.shape))
    np.testing.assert_allclose(got.reshape(2, H), _v1(shops, n), rtol=1e-5, atol=1e-4)


def _refusal(shops: Shops, inputs: dict[str, grpcclient.InferInput]) -> str:
    with pytest.raises(InferenceServerException) as info:
        shops.client.infer(NAME, list(inputs.values()))
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT", info.value
    return info.value.message() or ""


@pytest.mark.parametrize("missing", ["future_promo", "past_footfall", "static_size", "start"])
def test_grpc_refuses_a_missing_covariate_naming_it(shops: Shops, missing: str) -> None:
    inputs = _inputs(shops, DAYS - H)
    inputs.pop(missing)
    message = _refusal(shops, inputs)
    assert f"input '{missing}'" in message and "is missing" in message, message


def test_grpc_refuses_wrong_lengths_naming_the_input(shops: Shops) -> None:
    n, L = DAYS - H, shops.model.input_length
    inputs = _inputs(shops, n)
    inputs["future_promo"] = _input("future_promo", np.zeros((2, H - 1), np.float32), "FP32")
    message = _refusal(shops, inputs)
    assert f"input 'future_promo' must be FP32 of shape [2, {H}]" in message, message
    inputs = _inputs(shops, n)
    inputs["past_footfall"] = _input("past_footfall", np.zeros((2, L + 1), np.float32), "FP32")
    message = _refusal(shops, inputs)
    assert f"input 'past_footfall' must be FP32 of shape [2, {L}]" in message, message
    inputs = _inputs(shops, n)
    inputs["static_size"] = _input("static_size", np.array([0, 7], np.int64), "INT64")
    message = _refusal(shops, inputs)
    assert "static_size[1] = 7" in message, message
