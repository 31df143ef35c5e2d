"""Discovery of model versions on disk (a Triton-style model repository) and their integrity checks.

    <repository>/<model-name>/<version>/{model.onnx, inspect.onnx, manifest.json}

Only folders named by a positive integer are versions; anything else (an exporter's temporary
folder, a README) is skipped.

A model name is one plain folder name of the repository (`check_model_name`, the one copy of the rule:
every name a client or a setting gives goes through `model_folder`): 1 to MAX_NAME_BYTES bytes of
UTF-8, no `/`, `\\`, NUL or other control character, not only white space, not `.` or `..` and not
starting with `.` (the exporter's staging folders), and the folder it names, symlinks resolved, lies
inside the repository.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from app.artifacts.contract import MANIFEST_FILE
from app.artifacts.manifest import Manifest, ManifestError, load_manifest
from app.artifacts.publish import readable_dir, version_numbers

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20
# The longest model name, in bytes of UTF-8: well under a file name's 255 (ENAMETOOLONG), so a name is
# refused by this rule and never by the file system; 128 ASCII characters.
MAX_NAME_BYTES = 128
NAME_RULE = (
    f"a model name is one folder name of the model repository: 1 to {MAX_NAME_BYTES} bytes of UTF-8, "
    "no '/', '\\', NUL or control character, not only white space, not '.' or '..' and not starting "
    "with '.'"
)


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


class NameRefused(ValueError):  # noqa: N818
    """A model name that breaks the rule (NAME_RULE), or whose folder resolves outside the repository.
    The message depends on the name alone (and, for a symlink, on the repository's own content), never
    on whether such a folder exists elsewhere on the host."""


def check_model_name(name: str) -> None:
    """Raise NameRefused unless `name` is one plain folder name (the rule in NAME_RULE). Touches no file."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise NameRefused(f"the model name is not valid UTF-8; {NAME_RULE}") from None
    if size == 0:
        problem = "the model name is empty"
    elif size > MAX_NAME_BYTES:
        problem = f"the model name has {size} bytes, over {MAX_NAME_BYTES}"
    elif "/" in name or "\\" in name:
        problem = "the model name holds a path separator"
    elif any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        problem = "the model name holds NUL or a control character"
    elif not name.strip():  # " ", a no-break or an ideographic space: a folder no one can tell apart
        problem = "the model name is only white space"
    elif name.startswith("."):
        problem = "the model name starts with '.'"
    else:
        return
    raise NameRefused(f"{problem}; {NAME_RULE}")


def model_folder(repository: Path, name: str) -> Path:
    """The folder of model `name`: the name checked (`check_model_name`), then its folder, symlinks
    resolved, checked to lie inside the repository. Raises NameRefused."""
    check_model_name(name)
    folder = repository / name
    try:
        inside = folder.resolve().is_relative_to(repository.resolve())
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError up to Python 3.12)
        inside = False
    if not inside:
        raise NameRefused(f"model {name!r}: its folder resolves outside the model repository")
    return folder


def discover(repository: Path, names: list[str] | None = None) -> list[ModelRef]:
    """The models to serve, in `names` order or sorted by name, versions sorted ascending.

    `names` (from RSA_MODELS) selects models; a selected model that is missing or has no version
    folder comes back with an `error`. Raises RepositoryError when there is nothing to serve at all.
    Errors name models and versions, never a file path: they reach clients (/readyz, /v1/models). The
    logs, read by operators, have the paths.
    """
    try:
        if not repository.is_dir():
            raise RepositoryError("the model repository does not exist or is not a directory")
        found = sorted(p.name for p in repository.iterdir() if readable_dir(p) and not p.name.startswith("."))
    except OSError as exc:
        logger.error("model repository %s cannot be read: %s", repository, exc)
        reason = exc.strerror or type(exc).__name__
        raise RepositoryError(f"the model repository cannot be read ({reason})") from exc
    selected = list(dict.fromkeys(names)) if names else _named_by_the_rule(found)
    if not selected:
        raise RepositoryError("the model repository holds no model folder")
    return [_read_selected(repository, name) for name in selected]


def _read_selected(repository: Path, name: str) -> ModelRef:
    try:
        model_folder(repository, name)
    except NameRefused as exc:
        logger.error("model %r is not served: %s", name, exc)
        return ModelRef(name=name, error=str(exc))
    return read_model(repository, name)


def _named_by_the_rule(found: list[str]) -> list[str]:
    """The folder names the name rule allows (the others logged: no client could name them)."""
    allowed = []
    for name in found:
        try:
            check_model_name(name)
        except NameRefused as exc:
            logger.warning("folder %r of the model repository is skipped: %s", name, exc)
            continue
        allowed.append(name)
    return allowed


def model_names(repository: Path) -> list[str]:
    """The model folders in the repository now whose names the rule allows, sorted (none when it cannot
    be read)."""
    try:
        found = sorted(p.name for p in repository.iterdir() if readable_dir(p) and not p.name.startswith("."))
    except OSError:
        return []
    return [name for name in found if _allowed(name)]


def _allowed(name: str) -> bool:
    try:
        check_model_name(name)
    except NameRefused:
        return False
    return True


def read_model(repository: Path, name: str) -> ModelRef:
    """One model's version folders; an unreadable or empty folder is this model's error only."""
    folder = repository / name
    try:
        if not folder.is_dir():
            logger.error("model %r is configured but %s does not exist", name, folder)
            return ModelRef(name=name, error=f"model {name!r} has no folder in the repository")
        versions = [VersionRef(name, number, folder / str(number)) for number in version_numbers(folder)]
    except OSError as exc:
        logger.error("model %r: %s cannot be read: %s", name, folder, exc)
        reason = exc.strerror or type(exc).__name__
        return ModelRef(name=name, error=f"model {name!r}: its folder cannot be read ({reason})")
    if not versions:
        logger.error("model %r has no version folder (positive integer) under %s", name, folder)
        return ModelRef(name=name, error=f"model {name!r} has no version folder (a positive integer)")
    return ModelRef(name=name, versions=versions)


def public_message(message: str, folder: Path) -> str:
    """`message` with the version folder's path taken out, for clients: "model.onnx: ..." rather
    than an absolute path on the server."""
    return message.replace(f"{folder}/", "").replace(str(folder), "the version folder")


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
