"""Discovery of version folders and integrity checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.artifacts.manifest import ManifestError
from app.artifacts.repository import IntegrityError, RepositoryError, VersionRef, discover, read_version


@pytest.fixture
def repo(toy_repository: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    shutil.copytree(toy_repository, copy)
    return copy


def test_discovers_integer_version_folders_only(repo: Path) -> None:
    (repo / "toy" / ".tmp-export-3").mkdir()
    (repo / "toy" / "latest").mkdir()
    (repo / "toy" / "007").mkdir()
    (repo / "toy" / "²").mkdir()  # isdigit() but not int(): once a ValueError out of discovery
    (repo / "toy" / "٣").mkdir()  # isdigit() and int() == 3: never a version
    (repo / "toy" / "README.md").write_text("hi")
    (repo / "empty").mkdir()
    models = {m.name: m for m in discover(repo)}
    assert [v.version for v in models["toy"].versions] == [1, 2]
    assert models["empty"].error is not None and "no version folder" in models["empty"].error


def test_selected_models_and_missing_ones(repo: Path) -> None:
    models = discover(repo, ["ghost", "toy", "toy"])
    assert [m.name for m in models] == ["ghost", "toy"]
    assert models[0].error is not None and "has no folder in the repository" in models[0].error


def test_unusable_repository(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="does not exist"):
        discover(tmp_path / "nope")
    with pytest.raises(RepositoryError, match="no model"):
        discover(tmp_path)


def test_read_version_checks_files(repo: Path) -> None:
    ref = VersionRef("toy", 1, repo / "toy" / "1")
    assert read_version(ref).version == 1
    (ref.path / "inspect.onnx").write_bytes((ref.path / "inspect.onnx").read_bytes()[:-1] + b"\x00")
    with pytest.raises(IntegrityError, match="sha256"):
        read_version(ref)
    (ref.path / "inspect.onnx").write_bytes(b"short")
    with pytest.raises(IntegrityError, match="bytes"):
        read_version(ref)
    (ref.path / "inspect.onnx").unlink()
    with pytest.raises(IntegrityError, match="missing"):
        read_version(ref)


def test_read_version_checks_the_version_number(repo: Path) -> None:
    shutil.copytree(repo / "toy" / "1", repo / "toy" / "5")
    with pytest.raises(ManifestError, match="says version 1 but the folder is 5"):
        read_version(VersionRef("toy", 5, repo / "toy" / "5"))
    manifest = json.loads((repo / "toy" / "2" / "manifest.json").read_text())
    manifest["channels"] = "oops"
    (repo / "toy" / "2" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match="channels"):
        read_version(VersionRef("toy", 2, repo / "toy" / "2"))
