"""GET /v1/models and /v1/models/{name}: versions, manifest metadata, provider in use."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import engine_of


def test_list_models(client: TestClient) -> None:
    r = client.get("/v1/models")
    assert r.status_code == 200
    (model,) = r.json()["models"]
    assert (model["name"], model["ready"], model["latest_version"]) == ("toy", True, 2)
    assert [v["version"] for v in model["versions"]] == [1, 2]


def test_get_model_reports_manifest_and_provider(client: TestClient) -> None:
    r = client.get("/v1/models/toy")
    assert r.status_code == 200
    body = r.json()
    for version in body["versions"]:
        assert version["state"] == "ready" and version["error"] is None
        assert version["provider"] == "CPUExecutionProvider"
        assert version["kind"] == "rsa_transformer"  # what the model is, from the manifest
        assert version["description"] == "A toy RSA layer over 8 steps of 3 channels."
        assert (version["input_length"], version["horizon"]) == (8, 4)
        assert version["channels"] == ["HUFL", "MUFL", "OT"]
        assert (version["frequency"], version["frequency_seconds"]) == ("1h", 3600)
        assert version["metrics"] == {"test_mse": 0.5, "test_mae": 0.5}
        assert version["dataset"]["name"] == "toy"
        assert set(version["files"]) == {"model.onnx", "inspect.onnx"}
        heads = version["layers"][0]["heads"]
        assert heads[0] == {
            "head": 0,
            "kind": "regular",
            "dilation": 1,
            "lambda": 0.7,
            "gamma": None,
            "theta": None,
            "gate": 0.4,
        }
        assert heads[1]["kind"] == "softmax"


def test_provider_is_what_the_session_says(client: TestClient) -> None:
    model = engine_of(client).get("toy", 1).model
    assert model is not None
    session_provider = model.runner.session.get_providers()[0]  # type: ignore[attr-defined]
    assert client.get("/v1/models/toy").json()["versions"][0]["provider"] == session_provider


def test_unknown_model_is_404(client: TestClient) -> None:
    r = client.get("/v1/models/nope")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "model_not_found"
