"""Damaged models: each is reported with its reason (readiness, metadata, load-state metric, logs) and
none stops the healthy ones; what clients read names models and versions, never a server path."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from tests.app.conftest import in_process_engine, make_settings, running_client
from tests.app.fakes import write_repository
from tests.app.metrics_scrape import scrape, value

BODY = {"series": [{"values": np.ones((8, 3)).tolist()}]}


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    repository = tmp_path / "repository"
    write_repository(repository)  # "toy", versions 1 and 2: healthy
    write_repository(repository, versions=(1, 2, 3), name="wrecked")
    (repository / "wrecked" / "1" / "manifest.json").write_text("{not json")
    (repository / "wrecked" / "2" / "inspect.onnx").write_bytes(b"tampered")  # sha256 mismatch
    manifest = json.loads((repository / "wrecked" / "3" / "manifest.json").read_text())
    manifest["input_length"] = -4  # breaks the contract
    (repository / "wrecked" / "3" / "manifest.json").write_text(json.dumps(manifest))
    write_repository(repository, versions=(1,), name="locked")
    (repository / "hollow").mkdir()  # a model folder with no version
    return repository


@in_process_engine
def test_damaged_models_are_reported_and_the_rest_serve(
    damaged: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    locked = damaged / "locked"
    real_iterdir = Path.iterdir

    def iterdir(self: Path):  # type: ignore[no-untyped-def]
        if self == locked:  # root reads any folder, whatever its mode: refuse like an unreadable one
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    caplog.set_level(logging.ERROR, logger="app")
    with running_client(make_settings(damaged), ready=False) as client:
        assert client.post("/v1/models/toy/forecast", json=BODY).status_code == 200
        readiness = client.get("/readyz")
        assert readiness.status_code == 503
        reasons = {m["name"]: m["errors"] for m in readiness.json()["models"]}
        assert reasons["toy"] == []
        assert any("cannot be read" in e for e in reasons["locked"])
        assert any("no version folder" in e for e in reasons["hollow"])
        wrecked = " | ".join(reasons["wrecked"])
        assert "version 1" in wrecked and "version 2" in wrecked and "version 3" in wrecked
        assert "inspect.onnx" in wrecked  # which file, by its name in the version folder
        r = client.post("/v1/models/wrecked/versions/2/forecast", json=BODY)
        assert r.status_code == 503 and "version 2" in r.json()["error"]["message"]
        samples = scrape(client)
        for version in ("1", "2", "3"):
            assert (
                value(samples, "rsa_model_load_state", model="wrecked", version=version, state="failed") == 1
            )
        assert value(samples, "rsa_model_load_state", model="locked", version="", state="failed") == 1
        assert value(samples, "rsa_model_load_state", model="hollow", version="", state="failed") == 1
        client_facing = readiness.text + client.get("/v1/models").text + r.text
    assert str(damaged) not in client_facing and str(damaged.parent) not in client_facing
    logged = caplog.text
    assert str(damaged / "wrecked" / "2") in logged  # operators get the paths, in the logs
    assert str(locked) in logged
