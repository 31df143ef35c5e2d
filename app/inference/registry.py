"""The served models: each version's manifest, sessions, batcher and load state.

`ModelRegistry.load_all()` loads every discovered version one by one (sessions are created and warmed
up in a worker thread), so a broken version is recorded as failed and the others still serve.

Two thread pools: `forecast_executor` runs only the batchers' session calls (on the CPU provider up to
`single_thread_calls` small ones at once per version, else one),
`executor` runs everything else that blocks (loading, attention, plotting), so a burst of attention
requests never delays a forecast batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

from app.artifacts.manifest import Manifest
from app.artifacts.repository import (
    ModelRef,
    RepositoryError,
    VersionRef,
    discover,
    public_message,
    read_version,
)
from app.core.config import Settings
from app.core.context import requests_in_flight
from app.core.errors import ModelNotFound, ModelNotReady, VersionNotFound
from app.inference.batching import Batch, DynamicBatcher, WorkItem
from app.inference.model import OnnxModel
from app.inference.providers import RuntimeOptions
from app.inference.runners import Fault
from app.inference.session import default_intra_op_threads

logger = logging.getLogger(__name__)

T = TypeVar("T")
LoadState = Literal["loading", "ready", "failed"]
# (model, version, provider) -> the batcher's on_batch and on_item callbacks and the runner's on_retry
# (the metrics' hooks).
BatcherHooks = Callable[
    [str, int, str],
    tuple[Callable[[Batch], None], Callable[[WorkItem], None], Callable[[Fault], None]],
]


@dataclass(eq=False)
class ModelVersion:
    name: str
    version: int
    path: Path
    state: LoadState = "loading"
    error: str | None = None
    manifest: Manifest | None = None
    model: OnnxModel | None = None
    batcher: DynamicBatcher | None = None

    @property
    def ready(self) -> bool:
        return self.state == "ready"


@dataclass(eq=False)
class ServedModel:
    name: str
    versions: dict[int, ModelVersion] = field(default_factory=dict)
    error: str | None = None  # the model cannot be served at all (missing folder, no version)

    @property
    def loading(self) -> bool:
        return any(v.state == "loading" for v in self.versions.values())

    @property
    def ready(self) -> bool:
        return self.error is None and bool(self.versions) and all(v.ready for v in self.versions.values())

    @property
    def latest(self) -> ModelVersion | None:
        """The highest version that loaded; None while loading or when none did."""
        if self.loading:
            return None
        loaded = [v for v in self.versions.values() if v.ready]
        return max(loaded, key=lambda v: v.version) if loaded else None

    def errors(self) -> list[str]:
        found = [self.error] if self.error else []
        found += [f"version {v.version}: {v.error}" for v in self.versions.values() if v.error]
        found += [f"version {v.version}: loading" for v in self.versions.values() if v.state == "loading"]
        return found


def _alone() -> bool:
    """No request in flight but the current one: a session call on the event loop would stop no other."""
    return requests_in_flight() <= 1


def rows_per_call(manifest: Manifest, settings: Settings) -> int:
    """Series per session call for this version: `max_batch_rows`, fewer where that many would form more
    attention than `call_attention_mib` (at least one: a request of more series is split over calls)."""
    per_row = manifest.attention_bytes_per_row
    if per_row is None:
        return settings.max_batch_rows
    budget = int(settings.call_attention_mib * 2**20)
    return max(1, min(settings.max_batch_rows, budget // per_row))


def runtime_options(settings: Settings) -> RuntimeOptions:
    return RuntimeOptions(
        device=settings.device,
        cuda_device_id=settings.cuda_device_id,
        gpu_mem_limit_bytes=settings.gpu_mem_limit_bytes,
        intra_op_threads=settings.intra_op_threads,
        single_thread_max_rows=settings.single_thread_max_rows,
        single_thread_calls=settings.single_thread_calls,
        cuda_tf32=settings.cuda_tf32,
        cuda_io_binding=settings.cuda_io_binding,
        cuda_graphs=settings.cuda_graphs,
        batch_buckets=tuple(settings.batch_buckets),
    )


class ModelRegistry:
    """Owns the models and the thread pools their blocking calls run in."""

    def __init__(self, settings: Settings, batcher_hooks: BatcherHooks | None = None) -> None:
        self.settings = settings
        self.batcher_hooks = batcher_hooks
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rsa-aux")
        self.forecast_executor: ThreadPoolExecutor | None = None  # sized by discover()
        self.models: dict[str, ServedModel] = {}
        self.error: str | None = None  # the repository itself is unusable
        self._options = runtime_options(settings)
        # small calls of one version at once on the CPU provider (a version on CUDA, or with no
        # single-threaded instance, runs one call at a time)
        self._calls_per_version = settings.single_thread_calls or default_intra_op_threads()

    # -- lifecycle ---------------------------------------------------------------------------
    def discover(self) -> None:
        """Find the configured models and their version folders (fast: no file is read)."""
        try:
            refs = discover(self.settings.model_repository, self.settings.models or None)
        except RepositoryError as exc:
            logger.error("%s", exc)
            self.error = str(exc)
            return
        for ref in refs:
            self.models[ref.name] = self._served(ref)
        n_versions = sum(len(served.versions) for served in self.models.values())
        self.forecast_executor = ThreadPoolExecutor(
            max_workers=max(1, n_versions * self._calls_per_version), thread_name_prefix="rsa-forecast"
        )

    @staticmethod
    def _served(ref: ModelRef) -> ServedModel:
        served = ServedModel(name=ref.name, error=ref.error)
        for v in ref.versions:
            served.versions[v.version] = ModelVersion(name=v.model, version=v.version, path=v.path)
        return served

    async def load_all(self) -> None:
        """Load, check and warm up every version; start a batcher for each one that works."""
        for served in self.models.values():
            for mv in sorted(served.versions.values(), key=lambda v: v.version):
                await self._load_version(mv)
        if self.ready:
            logger.info("all models ready: %s", ", ".join(sorted(self.models)))
        else:
            logger.error("not ready: %s", "; ".join(self.readiness_errors()))

    async def _load_version(self, mv: ModelVersion) -> None:
        ref = VersionRef(mv.name, mv.version, mv.path)
        try:
            manifest, model = await self.run_blocking(self._open, ref)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error("model %s version %s at %s failed to load: %s", mv.name, mv.version, mv.path, exc)
            mv.state, mv.error = "failed", f"{type(exc).__name__}: {public_message(str(exc), mv.path)}"
            return
        on_batch, on_item, on_retry = (
            self.batcher_hooks(mv.name, mv.version, model.provider)
            if self.batcher_hooks
            else (None, None, None)
        )
        model.runner.on_retry = on_retry
        batcher = DynamicBatcher(
            model.run_forecast,  # takes the feed the data plane built: window, and phase for a cycle
            name=f"{mv.name}/{mv.version}",
            max_batch_rows=rows_per_call(manifest, self.settings),
            max_wait_s=self.settings.max_batch_wait_ms / 1000.0,
            max_queue_rows=self.settings.max_queue_rows,
            executor=self.forecast_executor,
            retry_after_s=self.settings.retry_after_s,
            on_batch=on_batch,
            on_item=on_item,
            release_fn=model.release_memory,
            release_after_s=self.settings.memory_release_idle_s,
            inline_max_rows=self.settings.inline_max_rows if model.policy.inline else 0,
            inline_when=_alone,
            inline_fn=partial(model.run_forecast, alone=True),
            max_calls=model.policy.max_calls,
            concurrent_max_rows=model.policy.concurrent_max_rows,
        )
        batcher.start()
        mv.manifest, mv.model, mv.batcher, mv.state = manifest, model, batcher, "ready"
        logger.info(
            "model %s version %s ready on %s (L=%d, H=%d, C=%d, at most %d series per session call)",
            mv.name,
            mv.version,
            model.provider,
            manifest.input_length,
            manifest.horizon,
            manifest.n_channels,
            batcher.max_batch_rows,
        )

    def _open(self, ref: VersionRef) -> tuple[Manifest, OnnxModel]:
        manifest = read_version(ref)
        model = OnnxModel(ref.path, manifest, self._options, rows_per_call(manifest, self.settings))
        model.load()
        model.warmup()
        return manifest, model

    async def stop(self, drain_timeout_s: float = 5.0) -> None:
        """Drain and stop every batcher (queued requests still run, for up to `drain_timeout_s`), then
        the thread pools."""
        batchers = [mv.batcher for s in self.models.values() for mv in s.versions.values() if mv.batcher]
        await asyncio.gather(*(b.stop(drain_timeout_s) for b in batchers), return_exceptions=True)
        for executor in (self.forecast_executor, self.executor):
            if executor is not None:
                await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    async def run_blocking(self, fn: Callable[..., T], *args: object) -> T:
        """Run a blocking call (loading, inspection, plotting) off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    # -- queries ---------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.error is None and bool(self.models) and all(s.ready for s in self.models.values())

    def readiness_errors(self) -> list[str]:
        errors = [self.error] if self.error else []
        for served in self.models.values():
            errors += [f"{served.name}: {e}" for e in served.errors()]
        return errors

    def model(self, name: str) -> ServedModel:
        served = self.models.get(name)
        if served is None:
            known = ", ".join(sorted(self.models)) or "none"
            raise ModelNotFound(f"model {name!r} not found; served models: {known}", field="name")
        return served

    def find_ready(self, name: str, version: int | None) -> ModelVersion | None:
        """The ready version `get` would return, or None where `get` would raise."""
        served = self.models.get(name)
        if served is None:
            return None
        mv = served.latest if version is None else served.versions.get(version)
        return mv if mv is not None and mv.ready else None

    def get(self, name: str, version: int | None = None) -> ModelVersion:
        """A ready version (the latest loaded one when `version` is None), or a domain error."""
        served = self.model(name)
        retry = self.settings.retry_after_s
        if version is None:
            mv = served.latest
            if mv is None:
                reason = "is still loading" if served.loading else "has no loaded version"
                details = "; ".join(served.errors())
                raise ModelNotReady(
                    f"model {name!r} {reason}" + (f" ({details})" if details else ""), retry_after_s=retry
                )
            return mv
        mv = served.versions.get(version)
        if mv is None:
            known = ", ".join(str(v) for v in sorted(served.versions)) or "none"
            raise VersionNotFound(
                f"model {name!r} has no version {version}; versions: {known}", field="version"
            )
        if mv.state == "loading":
            raise ModelNotReady(f"model {name!r} version {version} is still loading", retry_after_s=retry)
        if mv.state == "failed":
            raise ModelNotReady(f"model {name!r} version {version} failed to load: {mv.error}")
        return mv
