"""Publishing a version folder into a model repository: the one path the exporter (export/onnx.py,
export/global_models/onnx.py), the interval calibration (export/conformal.py) and the service's fit on request
(`publish` of /v1/.../fit_forecast) write through. Here, torch-free, so that the service can use it;
export/publish.py re-exports it.

A version is written into a hidden temporary folder beside the versions and renamed into place, so a
polling service sees it complete or not at all. Its name follows the service's rule
(`app.artifacts.contract.VERSION_FOLDER`: a positive integer without leading zeros); the next free
version counts only folders the service would serve, so a stray "01" or "tmp" neither blocks nor
shifts the numbering.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from app.artifacts.contract import VERSION_FOLDER

__all__ = [
    "VersionExistsError",
    "check_version",
    "is_version_folder",
    "next_version",
    "publish_version",
    "readable_dir",
    "version_numbers",
]


class VersionExistsError(FileExistsError):
    """The version folder to publish is already there; nothing was written."""


def is_version_folder(name: str) -> bool:
    """Whether the service serves a folder of this name as a version."""
    return VERSION_FOLDER.fullmatch(name) is not None


def version_numbers(model_dir: Path) -> list[int]:
    """The versions the service would serve in `model_dir`, ascending (none when it is no folder): its
    subfolders named by `is_version_folder`. The one reading of a model folder for the service's
    discovery, publishing and the benchmarks: `str.isdigit()` would take "²" (which `int()` refuses) and
    "٣" (which it reads as 3)."""
    if not model_dir.is_dir():
        return []
    return sorted(int(p.name) for p in model_dir.iterdir() if is_version_folder(p.name) and readable_dir(p))


def readable_dir(path: Path) -> bool:
    """Whether `path` is a folder; an unreadable one is not (not one the service can serve, and not a
    reason to stop reading the others)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def next_version(model_dir: Path) -> int:
    """One more than the highest version the service would serve in `model_dir` (1 when there is none)."""
    return max(version_numbers(model_dir), default=0) + 1


def check_version(version: int) -> int:
    """`version` when the service would serve it, else ValueError saying why."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(
            f"version must be a positive integer (the service serves only those), got {version!r}"
        )
    return version


def publish_version(model_dir: Path, write: Callable[[Path, int], None], version: int | None = None) -> Path:
    """Write a version of the model in `model_dir` and publish it; returns the version folder.

    `write(folder, version)` fills a temporary folder; when it returns, the folder is renamed to
    `model_dir/<version>` (the next free version when `version` is None). When it raises, the temporary
    folder is removed (and `model_dir` too, when this call created it and it is left empty) and the error
    propagates. Raises `VersionExistsError` before calling `write` when the version is already there."""
    version = next_version(model_dir) if version is None else check_version(version)
    final = model_dir / str(version)
    if final.exists():
        raise VersionExistsError(f"{final} exists; choose another --version")
    created = not model_dir.exists()
    model_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=model_dir))
    try:
        write(staging, version)
        staging.chmod(0o755)  # mkdtemp made it private
        staging.rename(final)  # publish: the version appears complete or not at all
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created and model_dir.exists() and not any(model_dir.iterdir()):
            model_dir.rmdir()
        raise
    return final
