"""Where a refit may be published and how much (issue 46, items 4 and 7): only into a model of the source's
kind, frequency, horizon, input length, channels, zone, covariates and local block, or a new model (409
naming each field that differs); a model keeps RSA_MAX_MODEL_VERSIONS versions (the oldest removed from
disk, never one the service holds: 409 naming them); RSA_MAX_MODEL_FOLDERS model folders; at most
RSA_MAX_PUBLISH_BYTES a version; a name of white space alone refused. Nothing is written by a refusal."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.artifacts.repository import NameRefused, check_model_name
from app.inference.publishing import remove_versions
from tests.app.conftest import make_settings, running_client
from tests.utils.panel import NAME, publish, store

KEY = "publish-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo, _ = publish(tmp_path_factory.mktemp("publish-bounds"))
    return repo


@pytest.fixture
def repo(trained: Path, tmp_path: Path) -> Path:
    """A repository of its own for each test: the trained model, version 1."""
    copy = tmp_path / "repo"
    shutil.copytree(trained, copy)
    return copy


@contextmanager
def serving(repo: Path, **limits: Any) -> Iterator[TestClient]:
    """The repository served with a key and explicit model control (publishing allowed), only NAME loaded."""
    settings = make_settings(repo, models=[NAME], api_keys=[KEY], model_control="explicit", **limits)
    with running_client(settings) as client:
        yield client


def fit(client: TestClient, target: str) -> Any:
    series = [store(200 + i, 60 - 5 * i) for i in range(3)]
    body = {
        "series": [
            {"id": f"s{i}", "start": "2015-01-01", "values": v.tolist()} for i, v in enumerate(series)
        ],
        "publish": {"model": target},
    }
    return client.post(f"/v1/models/{NAME}/versions/1/fit_forecast", json=body, headers=AUTH)


def versions(repo: Path, model: str) -> list[str]:
    folder = repo / model
    return sorted((p.name for p in folder.iterdir() if not p.name.startswith(".")), key=int)


def other_model(repo: Path, name: str, **changes: Any) -> None:
    """Model `name`: a copy of NAME's version 1 with manifest fields changed (`panel__local` for
    `panel.local`)."""
    shutil.copytree(repo / NAME / "1", repo / name / "1")
    path = repo / name / "1" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["name"] = name
    for key, value in changes.items():
        *parents, last = key.split("__")
        block = manifest
        for parent in parents:
            if block.get(parent) is None:
                block[parent] = {}
            block = block[parent]
        block[last] = value
    path.write_text(json.dumps(manifest))


# One field each, as a model another export could have published under the name.
OTHER_KINDS = {
    "kind": {"kind": "global_transformer"},
    "frequency": {"frequency": "1D", "frequency_seconds": 86400.0},
    "horizon": {"horizon": 18},
    "input_length": {"input_length": 48},
    "channels": {"channels": ["sales"]},
    "timezone": {"timezone": "Europe/Berlin"},
    "panel.covariates": {"panel__covariates": {"past": ["promo"], "future": [], "static": []}},
    "panel.local": {"panel__local": {"members": ["theta"], "length": 24}},
}


def test_a_refit_is_published_only_into_a_model_of_its_kind_or_a_new_one(repo: Path) -> None:
    for field, changes in OTHER_KINDS.items():
        other_model(repo, f"other-{field}", **changes)
    other_model(repo, "twin")  # the same kind under another name
    with serving(repo) as client:
        for field in OTHER_KINDS:
            target = f"other-{field}"
            r = fit(client, target)
            assert r.status_code == 409, (field, r.text)
            error = r.json()["error"]
            assert error["code"] == "publish_refused" and error["field"] == "publish.model"
            assert field in error["limit"], error  # the field named, with the model's value
            assert f"differs from model {target!r} version 1 in {field}" in error["message"]
            assert versions(repo, target) == ["1"]  # nothing written
        r = fit(client, "twin")
        assert r.status_code == 200, r.text
        assert r.json()["fit"]["published"] == {"model": "twin", "version": 2}
        r = fit(client, "brand-new")
        assert r.status_code == 200, r.text
        assert r.json()["fit"]["published"] == {"model": "brand-new", "version": 1}
        # The refit it published is of its source's kind: a refit of it may join it.
        assert fit(client, "brand-new").json()["fit"]["published"] == {"model": "brand-new", "version": 2}


def test_a_model_keeps_its_last_versions_and_never_loses_one_the_service_holds(repo: Path) -> None:
    other_model(repo, "twin")  # not loaded: nothing of it is held
    with serving(repo, max_model_versions=3) as client:
        for number in (2, 3):
            r = fit(client, NAME)
            assert r.json()["fit"]["published"] == {"model": NAME, "version": number}, r.text
        # A fourth would remove version 1, which the service holds (loaded at start-up): refused.
        r = fit(client, NAME)
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert error["code"] == "publish_refused" and error["limit"] == 3
        assert "RSA_MAX_MODEL_VERSIONS" in error["message"] and "holds [1]" in error["message"]
        assert versions(repo, NAME) == ["1", "2", "3"]
        # A model the service does not hold keeps its last three: the oldest removed from disk.
        for number in (2, 3, 4, 5):
            r = fit(client, "twin")
            assert r.json()["fit"]["published"] == {"model": "twin", "version": number}, r.text
        assert versions(repo, "twin") == ["3", "4", "5"]
        assert not [p for p in (repo / "twin").iterdir() if p.name.startswith(".")]  # no leftovers


def test_model_folders_are_bounded_and_a_name_of_white_space_is_refused(repo: Path) -> None:
    other_model(repo, "twin")
    with serving(repo, max_model_folders=2) as client:
        r = fit(client, "a-third-model")
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert error["field"] == "publish.model" and error["limit"] == 2
        assert "RSA_MAX_MODEL_FOLDERS" in error["message"]
        assert not (repo / "a-third-model").exists()
        assert fit(client, "twin").status_code == 200  # a model the repository holds: room enough
        for name in (" ", "\u3000", "\u00a0 \u2003"):
            r = fit(client, name)
            assert r.status_code == 422, (name, r.text)
            assert r.json()["error"]["field"] == "publish.model"
            assert "only white space" in r.json()["error"]["message"]
        assert sorted(p.name for p in repo.iterdir() if not p.name.startswith(".")) == [NAME, "twin"]
    with pytest.raises(NameRefused, match="only white space"):
        check_model_name(" ")
    check_model_name("a b")  # white space inside a name is a name


def test_the_bytes_a_publish_writes_are_bounded(repo: Path) -> None:
    graph = (repo / NAME / "1" / "model.onnx").stat().st_size
    # Under the graph itself: refused before the fit; over it but under the whole version (its manifest
    # too): refused as the version is written, its staging folder removed.
    for limit in (graph - 1, graph + 16):
        with serving(repo, max_publish_bytes=limit) as client:
            r = fit(client, NAME)
            assert r.status_code == 422, r.text
            error = r.json()["error"]
            assert error["field"] == "publish" and error["limit"] == limit
            assert "RSA_MAX_PUBLISH_BYTES" in error["message"]
        assert sorted(p.name for p in (repo / NAME).iterdir()) == ["1"]


def test_a_version_the_service_came_to_hold_is_kept(tmp_path: Path) -> None:
    """The versions to remove are checked again as they are removed: one loaded meanwhile is kept."""
    for number in (1, 2, 3):
        (tmp_path / str(number)).mkdir()
        (tmp_path / str(number) / "model.onnx").write_bytes(np.zeros(4).tobytes())
    assert remove_versions(tmp_path, (1, 2), lambda: {2}) == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2", "3"]
