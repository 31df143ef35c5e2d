"""The versions as the local engine holds them: each model and version it serves (`ServedModel`,
`ServedVersion`: state, error, its host once loaded) and a model folder as a load read it (`Scan`,
`fingerprint`). The repository manager (app/engine/manager.py) changes them; the front end sees each
version's `entry()` in the catalog (app/engine/catalog.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.artifacts.manifest import Manifest
from app.artifacts.repository import ModelRef, VersionRef
from app.engine.batching import DynamicBatcher
from app.engine.catalog import LoadState, VersionEntry
from app.engine.host import VersionHost
from app.engine.model import OnnxModel


@dataclass(eq=False)
class ServedVersion:
    """A version as the engine holds it (mutable; the front end sees its `entry()` in the catalog)."""

    name: str
    version: int
    path: Path
    state: LoadState = "loading"
    error: str | None = None
    host: VersionHost | None = None  # once it loaded: its sessions and batcher
    required: bool = True  # part of the start-up load: readiness waits for it (app/engine/catalog.py)
    fingerprint: tuple[int, ...] = ()  # the folder as it was when loaded: a failed one retried if it changes

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    @property
    def manifest(self) -> Manifest | None:
        return self.host.manifest if self.host is not None else None

    @property
    def model(self) -> OnnxModel | None:
        return self.host.model if self.host is not None else None

    @property
    def batcher(self) -> DynamicBatcher | None:
        return self.host.batcher if self.host is not None else None

    def entry(self) -> VersionEntry:
        return VersionEntry(
            name=self.name,
            version=self.version,
            state=self.state,
            error=self.error,
            manifest=self.manifest,
            provider=self.model.provider if self.model is not None and self.model.loaded else None,
            max_series_per_call=self.batcher.max_batch_rows if self.batcher is not None else None,
            required=self.required,
        )


@dataclass(eq=False)
class ServedModel:
    name: str
    versions: dict[int, ServedVersion] = field(default_factory=dict)
    error: str | None = None  # the model cannot be served at all (missing folder, no version, bad policy)
    required: bool = True  # part of the start-up load: readiness waits for it (app/engine/catalog.py)


@dataclass
class Scan:
    """A model's folder as a load found it (read in a load thread, app/engine/threads.py)."""

    ref: ModelRef
    exists: bool
    wanted: dict[int, VersionRef]  # the version folders its policy serves
    policy_error: str | None
    fingerprints: dict[int, tuple[int, ...]]  # of the wanted versions


def fingerprint(folder: Path) -> tuple[int, ...]:
    """When a version folder and its files last changed (0s where they cannot be read)."""
    stamps = []
    for path in (folder, *sorted(folder.glob("*"))):
        try:
            stamps.append(path.stat().st_mtime_ns)
        except OSError:
            stamps.append(0)
    return tuple(stamps)
