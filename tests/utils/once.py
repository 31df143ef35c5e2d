"""Models the tests train and export through the CLI, built once per test process and copied: several
test modules serve the same model (tests/utils/panel.py's stores, shops.py's shops, zoned.py's Berlin
series), and the training is deterministic (the same file, flags and seed give the same weights and
graph; only the manifest's `created` and the model's `fit_seconds` differ)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable, Hashable
from pathlib import Path

_BUILT: dict[Hashable, Path] = {}


def built(key: Hashable, folder: Path, build: Callable[[Path], object]) -> None:
    """`build(a folder)` the first time this process asks for `key`; then, and every later time, a copy of
    everything it wrote into `folder` (created if missing; the caller may change its copy freely)."""
    first = _BUILT.get(key)
    if first is None:
        first = Path(tempfile.mkdtemp(prefix="built-"))
        atexit.register(shutil.rmtree, first, ignore_errors=True)
        try:
            build(first)
        except BaseException:
            shutil.rmtree(first, ignore_errors=True)  # a failed build is tried again by the next caller
            raise
        _BUILT[key] = first
    shutil.copytree(first, folder, dirs_exist_ok=True, copy_function=shutil.copy)  # files written now
