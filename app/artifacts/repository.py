"""Discovery of model versions on disk (a Triton-style model repository) and their integrity checks.

    <repository>/<model-name>/<version>/{model.onnx, inspect.onnx, manifest.json}

Only folders named by a positive integer are versions; anything else (an exporter's temporary
folder, a README) is skipped.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from app.artifacts.contract import MANIFEST_FILE
from app.artifacts.manifest import Manifest, ManifestError, load_manifest

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20


@dataclass(frozen=True)
class VersionRef:
    """A version folder found on disk, not yet checked or loaded."""

    model: str
    version: int
    path: Path


@dataclass
class ModelRef:
    """A model to serve: its version folders, or why it cannot be served at all."""

    name: str
    versions: list[VersionRef] = field(default_factory=list)
    error: str | None = None


class RepositoryError(RuntimeError):
    """The repository itself is unusable: missing, or holding no model."""


class IntegrityError(ValueError):
    """A file listed in the manifest is missing or differs from its recorded sha256/size."""


def _version_number(folder: Path) -> int | None:
    name = folder.name
    if not folder.is_dir() or not name.isdigit() or name.startswith("0"):
        return None
    return int(name)


def discover(repository: Path, names: list[str] | None = None) -> list[ModelRef]:
    """The models to serve, in `names` order or sorted by name, versions sorted ascending.

    `names` (from RSA_MODELS) selects models; a selected model that is missing or has no version
    folder comes back with an `error`. Raises RepositoryError when there is nothing to serve at all.
    """
    if not repository.is_dir():
        raise RepositoryError(f"model repository {repository} does not exist or is not a directory")
    found = sorted(p.name for p in repository.iterdir() if p.is_dir() and not p.name.startswith("."))
    selected = list(dict.fromkeys(names)) if names else found
    if not selected:
        raise RepositoryError(f"model repository {repository} holds no model folder")
    models: list[ModelRef] = []
    for name in selected:
        folder = repository / name
        if not folder.is_dir():
            logger.error("model %r is configured but %s does not exist", name, folder)
            models.append(ModelRef(name=name, error=f"model folder {folder} does not exist"))
            continue
        versions = sorted(
            (
                VersionRef(name, number, child)
                for child in folder.iterdir()
                if (number := _version_number(child)) is not None
            ),
            key=lambda ref: ref.version,
        )
        if not versions:
            logger.error("model %r has no version folder (positive integer) under %s", name, folder)
            models.append(ModelRef(name=name, error=f"no version folder under {folder}"))
            continue
        models.append(ModelRef(name=name, versions=versions))
    return models


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_files(folder: Path, manifest: Manifest) -> None:
    """Every file the manifest lists exists with the recorded size and sha256."""
    for name, spec in manifest.files.items():
        path = folder / name
        if not path.is_file():
            raise IntegrityError(f"{path} is listed in the manifest but missing")
        size = path.stat().st_size
        if size != spec.bytes:
            raise IntegrityError(f"{path} has {size} bytes, the manifest says {spec.bytes}")
        actual = sha256_of(path)
        if actual != spec.sha256.lower():
            raise IntegrityError(f"{path} sha256 {actual} does not match the manifest's {spec.sha256}")


def read_version(ref: VersionRef) -> Manifest:
    """The version's manifest, checked against the folder and the files it lists."""
    manifest = load_manifest(ref.path / MANIFEST_FILE)
    if manifest.version != ref.version:
        raise ManifestError(
            f"{ref.path / MANIFEST_FILE} says version {manifest.version} but the folder is {ref.version}"
        )
    if manifest.name != ref.model:
        logger.warning(
            "%s: manifest name %r differs from the folder name %r; serving it as %r",
            ref.path,
            manifest.name,
            ref.model,
            ref.model,
        )
    verify_files(ref.path, manifest)
    return manifest
