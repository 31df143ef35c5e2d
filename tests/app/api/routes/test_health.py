"""/healthz and /readyz, while loading, when ready, and with broken or missing models."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.artifacts.repository import VersionRef
from app.engine.host import Opened
from app.engine.local import RepositoryManager
from app.main import create_app
from tests.app.conftest import make_settings, running_client, wait_for
from tests.app.fakes import ToySpec, write_version

BODY = {"series": [{"values": np.ones((8, 3)).tolist()}]}


def test_healthz_and_readyz_when_ready(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "alive"}
    r = client.get("/readyz")
    assert r.status_code == 200
    assert r.json() == {
        "ready": True,
        "draining": False,
        "models": [{"name": "toy", "ready": True, "errors": []}],
    }


def test_readyz_is_503_until_models_are_loaded(toy_repository: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    real_open = RepositoryManager._open

    def slow_open(self: RepositoryManager, ref: VersionRef) -> Opened:
        assert release.wait(10)
        return real_open(self, ref)

    monkeypatch.setattr(RepositoryManager, "_open", slow_open)
    with TestClient(create_app(make_settings(toy_repository)), raise_server_exceptions=False) as client:
        assert client.get("/healthz").status_code == 200
        r = client.get("/readyz")
        assert r.status_code == 503
        assert "loading" in r.json()["models"][0]["errors"][0]
        busy = client.post("/v1/models/toy/forecast", json=BODY)
        assert busy.status_code == 503
        assert busy.json()["error"]["code"] == "model_not_ready"
        assert "retry-after" in busy.headers
        assert client.get("/v1/models/toy").json()["versions"][0]["state"] == "loading"
        # the pretrained route too: a model still loading may be the one of the series' frequency, so
        # "none forecasts monthly series" would be a 422 for the server's state (serve.sh's first seconds)
        monthly = {"series": [{"start": "2020-01-01", "values": [1.0] * 24}], "freq": "MS"}
        early = client.post("/v1/forecast", json=monthly)
        assert early.status_code == 503 and early.json()["error"]["code"] == "model_not_ready", early.text
        assert "toy still loading" in early.json()["error"]["message"] and "retry-after" in early.headers
        release.set()
        wait_for(lambda: client.get("/readyz").status_code == 200, what="ready after release")
        assert client.post("/v1/models/toy/forecast", json=BODY).status_code == 200
        # loaded, and no pretrained model among them: now the client's to change (422 naming freq)
        late = client.post("/v1/forecast", json=monthly)
        assert late.status_code == 422 and late.json()["error"]["field"] == "freq", late.text


@pytest.fixture
def broken_repository(toy_repository: Path, tmp_path: Path) -> Path:
    """toy v1 fine, toy v2 with a model.onnx that no longer matches its sha256; model "other" fine."""
    repo = tmp_path / "repo"
    shutil.copytree(toy_repository, repo)
    model = repo / "toy" / "2" / "model.onnx"
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))
    write_version(repo, ToySpec(name="other", version=3))
    return repo


def test_bad_sha256_is_reported_not_fatal(broken_repository: Path) -> None:
    with running_client(make_settings(broken_repository), ready=False) as client:
        assert client.get("/healthz").status_code == 200
        r = client.get("/readyz")
        assert r.status_code == 503
        models = {m["name"]: m for m in r.json()["models"]}
        assert models["other"] == {"name": "other", "ready": True, "errors": []}
        assert not models["toy"]["ready"]
        assert "version 2" in models["toy"]["errors"][0] and "sha256" in models["toy"]["errors"][0]
        info = client.get("/v1/models/toy").json()
        v1, v2 = info["versions"]
        assert (v1["state"], v1["provider"]) == ("ready", "CPUExecutionProvider")
        assert (v2["state"], v2["provider"]) == ("failed", None)
        assert "sha256" in v2["error"]
        assert info["latest_version"] == 1
        # The latest loaded version serves; the broken one says why it cannot.
        ok = client.post("/v1/models/toy/forecast", json=BODY)
        assert (ok.status_code, ok.json()["version"]) == (200, 1)
        failed = client.post("/v1/models/toy/versions/2/forecast", json=BODY)
        assert failed.status_code == 503
        assert "sha256" in failed.json()["error"]["message"]
        assert client.post("/v1/models/other/forecast", json=BODY).status_code == 200


def test_configured_model_missing(toy_repository: Path) -> None:
    with running_client(make_settings(toy_repository, models=["toy", "ghost"]), ready=False) as client:
        r = client.get("/readyz")
        assert r.status_code == 503
        ghost = next(m for m in r.json()["models"] if m["name"] == "ghost")
        assert "has no folder in the repository" in ghost["errors"][0]
        assert client.post("/v1/models/toy/forecast", json=BODY).status_code == 200
        assert client.post("/v1/models/ghost/forecast", json=BODY).status_code == 503


def test_models_setting_selects_models(broken_repository: Path) -> None:
    with running_client(make_settings(broken_repository, models=["other"])) as client:
        assert [m["name"] for m in client.get("/v1/models").json()["models"]] == ["other"]
        assert client.post("/v1/models/toy/forecast", json=BODY).status_code == 404


def test_missing_repository(tmp_path: Path) -> None:
    with running_client(make_settings(tmp_path / "nowhere"), ready=False) as client:
        assert client.get("/healthz").status_code == 200
        r = client.get("/readyz")
        assert r.status_code == 503
        assert "does not exist" in r.json()["models"][0]["errors"][0]
        assert client.get("/v1/models").json() == {"models": []}
