"""Tests for export/publish.py: the one publishing path, under the service's version-folder rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.artifacts.publish import version_numbers
from app.artifacts.repository import discover
from export.publish import (
    VersionExistsError,
    check_version,
    is_version_folder,
    next_version,
    publish_version,
)

SERVED = {"1": 1, "2": 2, "10": 10, "999999": 999999}
# digits `str.isdigit()` takes: "²" (which int() refuses), "٣" and "１" (which it reads as 3 and 1)
NOT_SERVED = ["01", "0", "007", "-1", "1a", "tmp", ".3-abc", "²", "٣", "１", " 4", "1_0"]


@pytest.mark.parametrize("name", [*SERVED, *NOT_SERVED])
def test_the_exporter_and_the_service_read_version_folders_alike(tmp_path: Path, name: str) -> None:
    """One rule (`version_numbers`) for what the exporter publishes beside and the service discovers."""
    model = tmp_path / "m"
    (model / name).mkdir(parents=True)
    (model / "5").write_text("a file, not a folder")
    assert is_version_folder(name) == (name in SERVED)
    assert version_numbers(model) == ([SERVED[name]] if name in SERVED else [])
    (found,) = discover(tmp_path)
    assert [v.version for v in found.versions] == version_numbers(model)
    assert next_version(model) == SERVED.get(name, 0) + 1


def test_next_version_counts_only_served_folders(tmp_path: Path) -> None:
    assert next_version(tmp_path / "absent") == 1
    for name in ("01", "007", "tmp", ".4-staging"):
        (tmp_path / name).mkdir()
    assert next_version(tmp_path) == 1  # "01" and "007" are not versions the service serves
    (tmp_path / "3").mkdir()
    assert next_version(tmp_path) == 4


@pytest.mark.parametrize("bad", [0, -1, True, 1.0])
def test_check_version_refuses_what_the_service_would_not_serve(bad: object) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        check_version(bad)  # type: ignore[arg-type]


def test_publish_renames_a_complete_folder_into_place(tmp_path: Path) -> None:
    model_dir = tmp_path / "m"

    def write(folder: Path, version: int) -> None:
        assert folder.name.startswith(f".{version}-")  # hidden from a polling service while written
        (folder / "manifest.json").write_text(f'{{"version": {version}}}')

    final = publish_version(model_dir, write)
    assert final == model_dir / "1" and (final / "manifest.json").read_text() == '{"version": 1}'
    assert publish_version(model_dir, write).name == "2"
    with pytest.raises(VersionExistsError):
        publish_version(model_dir, write, 2)
    assert sorted(p.name for p in model_dir.iterdir()) == ["1", "2"]


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    def write(folder: Path, version: int) -> None:
        (folder / "model.onnx").write_bytes(b"half")
        raise RuntimeError("check failed")

    with pytest.raises(RuntimeError, match="check failed"):
        publish_version(tmp_path / "m", write)
    assert not (tmp_path / "m").exists()  # created by this call and left empty: removed
