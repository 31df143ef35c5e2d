"""Where a refit may be published, and how much (`publish` of /v1's fit_forecast; docs/security.md, "Fits on
request"): the checks `app.inference.refit.publish_refit` runs before it writes, and the one fitting.py
runs before the fit, so that a refusal costs no fit.

- **Same kind**: a refit becomes a version of a model of the same kind, frequency, horizon, input length,
  channels, zone, covariates and `panel.local` block as its source (those of the target's latest version
  on disk), or of a new model; else 409 naming each field that differs. A monthly refit published as
  version 2 of a daily covariate model made every client of that model fail once it was loaded.
- **Bounds**: RSA_MAX_MODEL_VERSIONS versions a model keeps (the oldest removed from disk after the
  publish, never one the service holds: then 409 naming them), RSA_MAX_MODEL_FOLDERS model folders in
  the repository (a new model beyond them: 409), RSA_MAX_PUBLISH_BYTES bytes one version writes (422).

Publishes hold a lock (a thread lock, and `flock` on the repository's `.publish.lock` for the other
processes of a replica), so two of them never count the same room twice.
"""

from __future__ import annotations

import fcntl
import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.artifacts.contract import MANIFEST_FILE, MODEL_FILE
from app.artifacts.publish import version_numbers
from app.artifacts.repository import NameRefused, model_folder
from app.core.config import Settings
from app.core.errors import InvalidInput, PublishRefused
from app.engine.catalog import Catalog

__all__ = [
    "COMPARED",
    "LOCK_FILE",
    "PublishPlan",
    "check_publish_bytes",
    "plan_publish",
    "precheck_publish",
    "publish_lock",
    "remove_versions",
    "served_versions",
]

logger = logging.getLogger(__name__)

# The manifest fields a version must share with the model it joins: what a client of the model sends and
# reads (the window's length and columns, the horizon, the steps and the zone its times are read in, the
# covariates it must send) and what the model is (kind, its local half).
COMPARED: tuple[tuple[str, ...], ...] = (
    ("kind",),
    ("frequency",),
    ("frequency_seconds",),
    ("horizon",),
    ("input_length",),
    ("channels",),
    ("timezone",),
    ("panel", "covariates"),
    ("panel", "local"),
)
# Beside the model folders, hidden (the repository skips names starting with '.').
LOCK_FILE = ".publish.lock"

_lock = threading.Lock()


@dataclass(frozen=True)
class PublishPlan:
    """A publish allowed: the target's folder, and the versions it removes once the new one is in."""

    folder: Path
    remove: tuple[int, ...] = ()


def served_versions(catalog: Catalog, name: str) -> set[int]:
    """The versions of `name` the service holds now (loading, ready or unloading: not failed)."""
    model = catalog.models.get(name)
    if model is None:
        return set()
    return {v.version for v in model.versions.values() if v.state != "failed"}


def plan_publish(
    repository: Path,
    target: str,
    source: dict[str, Any],
    settings: Settings,
    served: Callable[[], set[int]],
) -> PublishPlan:
    """Whether a version with manifest `source` may be published into model `target`, and what it
    removes: InvalidInput for a name the repository's rule refuses, PublishRefused (409) for a model of
    another kind or a bound it would pass. `served()`: the versions of `target` the service holds now."""
    try:
        folder = model_folder(repository, target)
    except NameRefused as e:
        raise InvalidInput(str(e), field="publish.model") from None
    versions = version_numbers(folder)
    if not versions:
        _check_room_for_a_model(repository, folder, settings.max_model_folders)
        return PublishPlan(folder)
    latest = max(versions)
    _check_same_kind(folder, target, latest, source)
    keep = settings.max_model_versions
    remove = versions[: max(0, len(versions) + 1 - keep)]
    held = sorted(set(remove) & served())
    if held:
        raise PublishRefused(
            f"model {target!r} keeps at most {keep} versions (RSA_MAX_MODEL_VERSIONS): version {latest + 1} "
            f"would have version(s) {remove} removed, and the service holds {held}: not published. Unload "
            f"them first (the repository API's unload, or a version_policy.json that leaves them out, then a "
            f"load), publish as another model, or raise RSA_MAX_MODEL_VERSIONS",
            field="publish.model",
            limit=keep,
        )
    return PublishPlan(folder, tuple(remove))


def precheck_publish(
    repository: Path, target: str, source: Path, settings: Settings, served: Callable[[], set[int]]
) -> None:
    """Before the fit: `plan_publish` for the source version folder's manifest, and its graph's bytes
    (the refit's graph has the same tensors) against RSA_MAX_PUBLISH_BYTES. The publish checks again."""
    manifest = json.loads((source / MANIFEST_FILE).read_text(encoding="utf-8"))
    plan_publish(repository, target, manifest, settings, served)
    check_publish_bytes((source / MODEL_FILE).stat().st_size, settings)


def check_publish_bytes(size: int, settings: Settings) -> None:
    """InvalidInput (422) when one version's files, `size` bytes, pass RSA_MAX_PUBLISH_BYTES."""
    limit = settings.max_publish_bytes
    if size > limit:
        raise InvalidInput(
            f"the refit's version would write {size} bytes; a publish writes at most {limit} "
            "(RSA_MAX_PUBLISH_BYTES): not published",
            field="publish",
            limit=limit,
        )


def remove_versions(folder: Path, versions: tuple[int, ...], served: Callable[[], set[int]]) -> list[int]:
    """Remove the version folders (each renamed to a hidden name first, so a reader sees it whole or not
    at all), but any the service came to hold since the plan (logged, kept). Returns those removed."""
    removed = []
    held = served()
    for version in versions:
        path = folder / str(version)
        if version in held:
            logger.warning("%s is held by the service now: kept (RSA_MAX_MODEL_VERSIONS passed by one)", path)
            continue
        try:
            hidden = Path(tempfile.mkdtemp(prefix=f".removed-{version}-", dir=folder))
            path.rename(hidden / "version")
        except OSError as e:
            logger.warning("%s could not be removed: %s", path, e)
            continue
        shutil.rmtree(hidden, ignore_errors=True)
        logger.info("%s removed: its model keeps the last versions (RSA_MAX_MODEL_VERSIONS)", path)
        removed.append(version)
    return removed


@contextmanager
def publish_lock(repository: Path) -> Iterator[None]:
    """One publish at a time into `repository`: this process's threads, then its other processes."""
    with _lock, open(repository / LOCK_FILE, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check_room_for_a_model(repository: Path, folder: Path, limit: int) -> None:
    if folder.exists():  # a folder without versions is counted already
        return
    models = sum(1 for p in repository.iterdir() if p.is_dir() and not p.name.startswith("."))
    if models >= limit:
        raise PublishRefused(
            f"the model repository holds {models} model folders, the most a publish may reach "
            f"(RSA_MAX_MODEL_FOLDERS {limit}): publish as a version of a model it holds, or raise the "
            "setting",
            field="publish.model",
            limit=limit,
        )


def _field(manifest: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = manifest
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _check_same_kind(folder: Path, target: str, latest: int, source: dict[str, Any]) -> None:
    where = f"model {target!r} version {latest}"
    try:
        theirs = json.loads((folder / str(latest) / MANIFEST_FILE).read_text(encoding="utf-8"))
        if not isinstance(theirs, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        raise PublishRefused(
            f"{where}'s manifest cannot be read ({type(e).__name__}), so a refit cannot be shown to be "
            "of its kind: not published; publish as a new model",
            field="publish.model",
        ) from None
    differ = {
        ".".join(path): (_field(source, path), _field(theirs, path))
        for path in COMPARED
        if _field(source, path) != _field(theirs, path)
    }
    if differ:
        shown = "; ".join(
            f"{name}: the refit's {_brief(ours)}, {where}'s {_brief(its)}"
            for name, (ours, its) in differ.items()
        )
        raise PublishRefused(
            f"a refit is published only as a version of a model of its kind, or as a new model; it differs "
            f"from {where} in {', '.join(differ)} ({shown}): not published",
            field="publish.model",
            limit={name: _brief(its) for name, (_, its) in differ.items()},
        )


def _brief(value: Any) -> str:
    """A field's value as an answer shows it: a block (covariates, a local half) by its keys alone."""
    if value is None:
        return "none"
    if isinstance(value, dict):
        return f"a block of {sorted(value)}"
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
