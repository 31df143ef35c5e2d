"""POST /v1/models/{name}/attention: matrices equal a direct inspect.onnx call, JSON or PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.app.attention_json import assert_encoded_as_before
from tests.app.conftest import ort_run

L, C, N, HH = 8, 3, 1, 2
URL = "/v1/models/toy/attention"
GATES = [0.4, 0.0]  # tests/app/fakes.py DEFAULT_HEADS


@pytest.fixture(scope="module")
def series() -> np.ndarray:
    return np.random.default_rng(42).normal(0, 1, (L + 5, C)).astype(np.float32)


def inspect(repo: Path, version: int, window: np.ndarray) -> dict[str, np.ndarray]:
    names = ["attn_softmax", "attn_rem", "attn_mixed"]
    outputs = ort_run(repo / "toy" / str(version) / "inspect.onnx", window[None], names)
    return dict(zip(names, outputs, strict=True))


def post(client: TestClient, body: dict[str, Any], url: str = URL, **params: str) -> dict[str, Any]:
    r = client.post(url, json=body, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_matrices_equal_direct_inspect_call(
    client: TestClient, toy_repository: Path, series: np.ndarray
) -> None:
    body = post(client, {"series": {"values": series.tolist()}})
    assert (body["model"], body["version"], body["provider"]) == ("toy", 2, "CPUExecutionProvider")
    assert body["channel"] == {"index": 0, "name": "HUFL"}
    assert body["input_length"] == L
    ref = inspect(toy_repository, 2, series[-L:])
    assert [layer["layer"] for layer in body["layers"]] == list(range(N))
    layer = body["layers"][0]
    assert layer["gate_mode"] == "layer" and layer["mean"] is None
    assert [h["head"] for h in layer["heads"]] == [0, 1]
    regular, plain = layer["heads"]
    assert (regular["kind"], regular["lambda"], regular["gate"]) == ("regular", 0.7, 0.4)
    assert regular["dilation"] == 1
    assert (plain["kind"], plain["lambda"], plain["gate"]) == ("softmax", None, 0.0)
    for h, head in enumerate(layer["heads"]):
        m = {k: np.array(v) for k, v in head["matrices"].items()}
        assert m["softmax"].shape == (L, L)
        np.testing.assert_allclose(m["softmax"], ref["attn_softmax"][0, 0, 0, h], atol=1e-6)
        np.testing.assert_allclose(m["rem"], ref["attn_rem"][0, h], atol=1e-6)
        np.testing.assert_allclose(m["mixed"], ref["attn_mixed"][0, 0, 0, h], atol=1e-6)
        np.testing.assert_allclose(m["softmax"].sum(axis=1), 1.0, atol=1e-5)
        g = head["gate"]
        np.testing.assert_allclose(m["mixed"], (1 - g) * m["softmax"] + g * m["rem"], atol=1e-5)
    assert np.allclose(np.array(plain["matrices"]["rem"]), 0.0)
    assert np.allclose(np.diag(np.array(regular["matrices"]["rem"])), 0.0)


@pytest.mark.parametrize(("channel", "index"), [("OT", 2), (1, 1)])
def test_channel_option(
    client: TestClient, toy_repository: Path, series: np.ndarray, channel: Any, index: int
) -> None:
    body = post(client, {"series": {"values": series.tolist()}, "channel": channel, "matrices": ["softmax"]})
    assert body["channel"]["index"] == index
    ref = inspect(toy_repository, 2, series[-L:])
    head = body["layers"][0]["heads"][0]
    np.testing.assert_allclose(
        np.array(head["matrices"]["softmax"]), ref["attn_softmax"][0, index, 0, 0], atol=1e-6
    )
    assert head["matrices"]["rem"] is None and head["matrices"]["mixed"] is None
    other = post(client, {"series": {"values": series.tolist()}, "matrices": ["softmax"]})
    assert not np.allclose(other["layers"][0]["heads"][0]["matrices"]["softmax"], head["matrices"]["softmax"])


def test_average_heads_and_layers_subset(
    client: TestClient, toy_repository: Path, series: np.ndarray
) -> None:
    body = post(
        client,
        {
            "series": {"values": series.tolist()},
            "average_heads": True,
            "layers": [0],
            "matrices": ["mixed", "rem"],
        },
    )
    layer = body["layers"][0]
    assert all(h["matrices"] is None for h in layer["heads"])
    assert [h["kind"] for h in layer["heads"]] == ["regular", "softmax"]  # metadata stays
    ref = inspect(toy_repository, 2, series[-L:])
    np.testing.assert_allclose(
        np.array(layer["mean"]["mixed"]), ref["attn_mixed"][0, 0, 0].mean(axis=0), atol=1e-6
    )
    np.testing.assert_allclose(np.array(layer["mean"]["rem"]), ref["attn_rem"][0].mean(axis=0), atol=1e-6)
    assert layer["mean"]["softmax"] is None


def test_explicit_version(client: TestClient, toy_repository: Path, series: np.ndarray) -> None:
    body = post(
        client,
        {"series": {"values": series.tolist()}, "matrices": ["softmax"]},
        url="/v1/models/toy/versions/1/attention",
    )
    assert body["version"] == 1
    ref = inspect(toy_repository, 1, series[-L:])
    np.testing.assert_allclose(
        np.array(body["layers"][0]["heads"][1]["matrices"]["softmax"]),
        ref["attn_softmax"][0, 0, 0, 1],
        atol=1e-6,
    )


@pytest.mark.parametrize("how", ["query", "field"])
def test_png(client: TestClient, series: np.ndarray, how: str) -> None:
    body: dict[str, Any] = {"series": {"values": series.tolist()}}
    params = {"format": "png"} if how == "query" else {}
    if how == "field":
        body.update(format="png", matrices=["mixed"])
    r = client.post(URL, json=body, params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
    assert r.content.startswith(b"\x89PNG\r\n\x1a\n")


def test_png_averaged_subset(client: TestClient, series: np.ndarray) -> None:
    body = {"series": {"values": series.tolist()}, "average_heads": True, "matrices": ["mixed"]}
    r = client.post(URL, json=body, params={"format": "png"})
    assert r.status_code == 200 and r.content.startswith(b"\x89PNG")


def test_query_format_json_overrides_field(client: TestClient, series: np.ndarray) -> None:
    body = {"series": {"values": series.tolist()}, "format": "png"}
    r = client.post(URL, json=body, params={"format": "json"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")


ERRORS: list[tuple[str, dict[str, Any], dict[str, str], int, str, Any]] = [
    ("unknown channel name", {"channel": "XX"}, {}, 422, "channel", ["HUFL", "MUFL", "OT"]),
    ("channel index too big", {"channel": 3}, {}, 422, "channel", 2),
    ("layer out of range", {"layers": [0, 1]}, {}, 422, "layers[1]", 0),
    (
        "unknown matrix",
        {"matrices": ["softmax", "qk"]},
        {},
        422,
        "matrices[1]",
        "'softmax', 'rem' or 'mixed'",
    ),
    ("empty matrices", {"matrices": []}, {}, 422, "matrices", 1),
    ("bad format field", {"format": "gif"}, {}, 422, "format", "'json' or 'png'"),
    ("bad format query", {}, {"format": "gif"}, 422, "format", "'json' or 'png'"),
    ("too short", {"series": {"values": [[1.0, 2.0, 3.0]] * (L - 1)}}, {}, 422, "series.values", L),
    ("series as a list", {"series": [{"values": [[1.0, 2.0, 3.0]] * L}]}, {}, 422, "series", None),
]


@pytest.mark.parametrize(
    ("extra", "params", "status", "field", "limit"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS]
)
def test_invalid_attention_requests(
    client: TestClient,
    series: np.ndarray,
    extra: dict[str, Any],
    params: dict[str, str],
    status: int,
    field: str,
    limit: Any,
) -> None:
    body = {"series": {"values": series.tolist()}, **extra}
    r = client.post(URL, json=body, params=params)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert (error["field"], error["limit"]) == (field, limit)


def test_unknown_model_and_version(client: TestClient, series: np.ndarray) -> None:
    body = {"series": {"values": series.tolist()}}
    assert client.post("/v1/models/nope/attention", json=body).status_code == 404
    assert client.post("/v1/models/toy/versions/3/attention", json=body).status_code == 404


def test_repeated_layers_are_refused(client: TestClient, series: np.ndarray) -> None:
    r = client.post(URL, json={"series": {"values": series.tolist()}, "layers": [0, 0]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "layers[1]"
    r = client.post(URL, json={"series": {"values": series.tolist()}, "matrices": ["rem"] * 4})
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("matrices")


def test_answer_size_is_bounded_before_the_session_runs(toy_repository: Path, series: np.ndarray) -> None:
    from app.artifacts.manifest import load_manifest
    from tests.app.conftest import engine_of, make_settings, running_client

    m = load_manifest(toy_repository / "toy" / "2" / "manifest.json")
    assert m.n_layers and m.n_heads
    one_matrix_averaged = m.n_layers * m.input_length**2
    settings = make_settings(toy_repository, max_attention_values=one_matrix_averaged)
    with running_client(settings) as client:
        model = engine_of(client).get("toy", 2).model
        assert model is not None
        calls = [0]
        inner = model.inspect_feed

        def counted(*args: Any) -> Any:
            calls[0] += 1
            return inner(*args)

        model.inspect_feed = counted  # type: ignore[method-assign]
        small = {"series": {"values": series.tolist()}, "matrices": ["mixed"], "average_heads": True}
        assert client.post(URL, json=small).status_code == 200
        r = client.post(URL, json={"series": {"values": series.tolist()}})  # every head, three matrices
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert (error["field"], error["limit"]) == ("matrices", one_matrix_averaged)
        assert str(m.n_layers * m.n_heads * 3 * m.input_length**2) in error["message"]
        assert calls[0] == 1  # the refused request never reached the session


def test_png_rendering_holds_the_inspection_slot(toy_repository: Path, series: np.ndarray) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import app.protocols.rsa_v1.handlers as handlers
    from tests.app.conftest import make_settings, running_client, wait_for

    gate, rendering = threading.Event(), threading.Event()
    real_render = handlers.render_attention_png

    def slow_render(*args: Any) -> bytes:
        rendering.set()
        assert gate.wait(10)
        return real_render(*args)

    body = {"series": {"values": series.tolist()}, "matrices": ["mixed"]}
    settings = make_settings(toy_repository, max_attention_in_flight=1)
    with running_client(settings) as client, ThreadPoolExecutor(max_workers=1) as pool:
        handlers.render_attention_png = slow_render
        try:
            png = pool.submit(client.post, URL, json=body, params={"format": "png"})
            wait_for(rendering.is_set, what="the PNG to be rendering")
            busy = client.post(URL, json=body)
            assert busy.status_code == 503 and busy.json()["error"]["code"] == "overloaded"
            gate.set()
            assert png.result(10).content.startswith(b"\x89PNG")
        finally:
            handlers.render_attention_png = real_render
        assert client.post(URL, json=body).status_code == 200


ENCODING_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("every matrix", URL, {}),
    ("one matrix, a channel by name", URL, {"matrices": ["rem"], "channel": "OT"}),
    ("heads averaged", URL, {"average_heads": True, "matrices": ["mixed", "softmax"]}),
    ("version 1", "/v1/models/toy/versions/1/attention", {"layers": [0]}),
]


@pytest.mark.parametrize(
    ("url", "extra"), [c[1:] for c in ENCODING_CASES], ids=[c[0] for c in ENCODING_CASES]
)
def test_json_parses_as_the_pydantic_encoder_wrote_it(
    client: TestClient, series: np.ndarray, url: str, extra: dict[str, Any]
) -> None:
    assert_encoded_as_before(client, url, {"series": {"values": series.tolist()}, **extra})
