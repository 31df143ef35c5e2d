"""tests/utils/once.py: a model the tests build is built once per run, whichever process asks first, and a
failed build leaves nothing behind."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.utils import once


@pytest.fixture
def run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv(once.SHARED, str(shared))
    monkeypatch.setattr(once, "_BUILT", {})
    return shared


def test_a_second_process_copies_the_first_ones_build(run_folder: Path, tmp_path: Path) -> None:
    calls: list[Path] = []

    def build(into: Path) -> None:
        calls.append(into)
        (into / "model.json").write_text("{}")

    once.built(("panel", False), tmp_path / "a", build)
    once._BUILT.clear()  # what another process of the run knows
    once.built(("panel", False), tmp_path / "b", build)
    assert len(calls) == 1 and (tmp_path / "b" / "model.json").read_text() == "{}"
    once.built(("panel", True), tmp_path / "c", build)  # another key: its own build
    assert len(calls) == 2


def test_two_askers_at_once_wait_for_one_build(run_folder: Path, tmp_path: Path) -> None:
    started, release, calls = threading.Event(), threading.Event(), []

    def build(into: Path) -> None:
        calls.append(into)
        started.set()
        assert release.wait(30)
        (into / "weights").write_bytes(b"w")

    first = threading.Thread(target=once.built, args=("k", tmp_path / "a", build))
    first.start()
    assert started.wait(30)
    once._BUILT.clear()
    second = threading.Thread(target=once._build, args=(repr("k"), build))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting on the lock, not building
    release.set()
    first.join(30)
    second.join(30)
    assert len(calls) == 1 and (tmp_path / "a" / "weights").read_bytes() == b"w"


def test_a_failed_build_leaves_nothing_and_is_tried_again(run_folder: Path, tmp_path: Path) -> None:
    def broken(into: Path) -> None:
        (into / "half").write_text("x")
        raise RuntimeError("training failed")

    with pytest.raises(RuntimeError, match="training failed"):
        once.built("k", tmp_path / "a", broken)
    assert [p for p in run_folder.iterdir() if p.suffix != ".lock"] == []
    once.built("k", tmp_path / "b", lambda into: (into / "ok").write_text("y"))
    assert (tmp_path / "b" / "ok").read_text() == "y" and not (tmp_path / "b" / "half").exists()
