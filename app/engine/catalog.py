"""The catalog: an immutable snapshot of the served versions, what every front end reads.

The engine builds a new `Catalog` whenever a version's state changes (loading, ready, failed, unloaded)
and swaps it in at once; readers hold a snapshot that never changes under them. Protocols, middleware,
readiness and metadata resolve names and versions here and never touch the engine's objects. Across
processes the catalog travels as `to_wire()` / `from_wire()` (manifests as the JSON they were read from).

`latest` is the highest version that is ready, whatever else is loading: a new version takes over only
once it is ready, in one swap, and an unversioned request never waits for a reload.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from app.artifacts.manifest import Manifest, parse_manifest
from app.core.errors import ModelNotFound, ModelNotReady, VersionNotFound

# Said with every unknown name: a model exported into the repository of a running service is not served
# until the service loads it, which it does by itself only in poll mode (docs/service.md).
PUBLISH_HINT = (
    "A model published after the service started is served only once it is loaded: start the service "
    "with RSA_MODEL_CONTROL=poll (it rescans the repository every RSA_POLL_S) or RSA_MODEL_CONTROL=explicit "
    "and call POST /v2/repository/models/{name}/load, or restart it"
)

LoadState = Literal["loading", "ready", "failed", "unloading"]
LOAD_STATES: tuple[LoadState, ...] = ("loading", "ready", "failed", "unloading")


@dataclass(frozen=True)
class VersionEntry:
    name: str
    version: int
    state: LoadState
    error: str | None = None
    manifest: Manifest | None = None
    provider: str | None = None  # the execution provider really running its forecasts
    max_series_per_call: int | None = None  # rows per session call (attention memory caps it)
    # Loaded at start-up: readiness waits for it. A version loaded later (RSA_MODEL_CONTROL poll or
    # explicit) that fails is reported, but does not take the replica out of its load balancer.
    required: bool = True

    @property
    def ready(self) -> bool:
        return self.state == "ready"


@dataclass(frozen=True)
class ModelEntry:
    name: str
    versions: Mapping[int, VersionEntry] = field(default_factory=lambda: MappingProxyType({}))
    error: str | None = None  # the model cannot be served at all (missing folder, no version)
    # Part of the start-up load. A model loaded later (the repository API, a poll) is served and reported,
    # but the replica's readiness never waits for it: Triton's rule, the replica is ready when what it was
    # started to serve is ready, so one bad load call never takes it out of its load balancer.
    required: bool = True

    @property
    def loading(self) -> bool:
        return any(v.state == "loading" for v in self.versions.values())

    @property
    def ready(self) -> bool:
        """What /readyz waits for: a version to serve, and every version of the start-up load ready."""
        return (
            self.error is None
            and self.latest is not None
            and all(v.ready for v in self.versions.values() if v.required)
        )

    @property
    def latest(self) -> VersionEntry | None:
        """The highest ready version; None when none is."""
        ready = [v for v in self.versions.values() if v.ready]
        return max(ready, key=lambda v: v.version) if ready else None

    def errors(self) -> list[str]:
        found = [self.error] if self.error else []
        found += [f"version {v.version}: {v.error}" for v in self.sorted() if v.error]
        found += [
            f"version {v.version}: {v.state}" for v in self.sorted() if v.state in ("loading", "unloading")
        ]
        return found

    def sorted(self) -> list[VersionEntry]:
        return [self.versions[v] for v in sorted(self.versions)]


@dataclass(frozen=True)
class Catalog:
    models: Mapping[str, ModelEntry] = field(default_factory=lambda: MappingProxyType({}))
    error: str | None = None  # the repository itself is unusable
    generation: int = 0  # grows with every swap

    @property
    def ready(self) -> bool:
        """The replica's readiness: a model to serve, and every model of the start-up load ready."""
        return (
            self.error is None
            and bool(self.models)
            and all(m.ready for m in self.models.values() if m.required)
        )

    @property
    def loading_any(self) -> bool:
        """Some version is still loading (ready or not, the others are settled)."""
        return any(m.loading for m in self.models.values())

    def readiness_errors(self) -> list[str]:
        errors = [self.error] if self.error else []
        for served in self.models.values():
            errors += [f"{served.name}: {e}" for e in served.errors()]
        return errors

    def versions(self) -> Iterator[VersionEntry]:
        for served in self.models.values():
            yield from served.sorted()

    def model(self, name: str) -> ModelEntry:
        served = self.models.get(name)
        if served is None:
            known = ", ".join(sorted(self.models)) or "none"
            raise ModelNotFound(
                f"model {name!r} not found; served models: {known}. {PUBLISH_HINT.format(name=name)}",
                field="name",
            )
        return served

    def find_ready(self, name: str, version: int | None) -> VersionEntry | None:
        """The ready version `resolve` would return, or None where it would raise."""
        served = self.models.get(name)
        if served is None:
            return None
        entry = served.latest if version is None else served.versions.get(version)
        return entry if entry is not None and entry.ready else None

    def resolve(self, name: str, version: int | None = None, retry_after_s: int = 1) -> VersionEntry:
        """A ready version (the latest when `version` is None), or the domain error its state deserves."""
        served = self.model(name)
        if version is None:
            entry = served.latest
            if entry is None:
                reason = "is still loading" if served.loading else "has no loaded version"
                details = "; ".join(served.errors())
                raise ModelNotReady(
                    f"model {name!r} {reason}" + (f" ({details})" if details else ""),
                    retry_after_s=retry_after_s,
                )
            return entry
        entry = served.versions.get(version)
        if entry is None:
            known = ", ".join(str(v) for v in sorted(served.versions)) or "none"
            raise VersionNotFound(
                f"model {name!r} has no version {version}; versions: {known}", field="version"
            )
        if entry.state == "loading":
            raise ModelNotReady(
                f"model {name!r} version {version} is still loading", retry_after_s=retry_after_s
            )
        if entry.state == "unloading":
            raise ModelNotReady(f"model {name!r} version {version} is being unloaded")
        if entry.state == "failed":
            raise ModelNotReady(f"model {name!r} version {version} failed to load: {entry.error}")
        return entry

    # -- across processes ------------------------------------------------------------------------
    def to_wire(self) -> dict[str, Any]:
        """Plain data (JSON-able): manifests as their JSON form."""
        return {
            "generation": self.generation,
            "error": self.error,
            "models": [
                {
                    "name": m.name,
                    "error": m.error,
                    "required": m.required,
                    "versions": [
                        {
                            "version": v.version,
                            "state": v.state,
                            "error": v.error,
                            "provider": v.provider,
                            "max_series_per_call": v.max_series_per_call,
                            "required": v.required,
                            "manifest": None
                            if v.manifest is None
                            else v.manifest.model_dump(mode="json", by_alias=True),
                        }
                        for v in m.sorted()
                    ],
                }
                for m in self.models.values()
            ],
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Catalog:
        """The catalog `to_wire` wrote (each manifest checked again, as a manifest file is)."""
        models: dict[str, ModelEntry] = {}
        for m in data["models"]:
            versions = {
                v["version"]: VersionEntry(
                    name=m["name"],
                    version=v["version"],
                    state=v["state"],
                    error=v["error"],
                    manifest=None if v["manifest"] is None else parse_manifest(v["manifest"]),
                    provider=v["provider"],
                    max_series_per_call=v["max_series_per_call"],
                    required=v["required"],
                )
                for v in m["versions"]
            }
            models[m["name"]] = ModelEntry(
                m["name"], MappingProxyType(versions), m["error"], m.get("required", True)
            )
        return cls(MappingProxyType(models), data["error"], data["generation"])
