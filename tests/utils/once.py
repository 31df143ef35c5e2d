"""Models the tests train and export through the CLI, built once per test run and copied: several test
modules serve the same model (tests/utils/panel.py's stores, shops.py's shops, zoned.py's Berlin series),
and the training is deterministic (the same file, flags and seed give the same weights and graph; only the
manifest's `created` and the model's `fit_seconds` differ).

Once per run, not per process: under xdist both workers ask for the same models, so the build goes into
the folder every process of the run shares (`SHARED`, which tests/conftest.py creates before the workers
start), under a lock: the second process to ask waits for the first one's build and copies it."""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Hashable
from pathlib import Path

SHARED = "RSA_TEST_BUILT"  # the environment variable naming the run's shared folder
_BUILT: dict[Hashable, Path] = {}


def built(key: Hashable, folder: Path, build: Callable[[Path], object]) -> None:
    """`build(a folder)` the first time this run asks for `key` (its repr names it across processes); then,
    and every later time, a copy of everything it wrote into `folder` (created if missing; the caller may
    change its copy freely)."""
    first = _BUILT.get(key)
    if first is None:
        first = _BUILT[key] = _build(repr(key), build)
    shutil.copytree(first, folder, dirs_exist_ok=True, copy_function=shutil.copy)  # files written now


def _build(name: str, build: Callable[[Path], object]) -> Path:
    shared = os.environ.get(SHARED)
    if shared is None:  # outside a pytest run of this suite (tests/conftest.py sets the folder)
        root = Path(tempfile.mkdtemp(prefix="built-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        return _built_into(root / "model", build)
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    done = Path(shared) / digest
    with (Path(shared) / f"{digest}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, a failed build included
        if not done.is_dir():
            _built_into(done, build)
    return done


def _built_into(done: Path, build: Callable[[Path], object]) -> Path:
    """`build` into a staging folder beside `done`, then renamed: a failed build leaves nothing, and is
    tried again by the next caller."""
    staging = Path(tempfile.mkdtemp(prefix=f"{done.name}-", dir=done.parent))
    try:
        build(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    staging.rename(done)
    return done
