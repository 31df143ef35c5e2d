"""The local engine: the served versions' sessions, batchers and admission, in this process.

Two parts: `RepositoryManager` (app/engine/manager.py) decides which versions are served and when
(discovery, loading, polling, Triton's repository API, the catalog), and each ready version is a
`VersionHost` (app/engine/host.py: its manifest, sessions and batcher); `LocalEngine` is the engine API
over them, routing each call to its version's host. app/wiring.py's `local_engine` builds one with the
metrics it reports to.

`LocalEngine.start()` discovers the model repository and loads every version in the background (the
manager's module doc says how); each change of a version's state swaps in a new `Catalog`
(app/engine/catalog.py), which is all the front end reads.

Two thread pools: `forecast_executor` runs only the batchers' session calls (on the CPU provider up to
`single_thread_calls` small ones at once per version, else one); `executor` runs everything else that
blocks (loading, inspection), so a burst of attention requests never delays a forecast batch.

Admission (`admit`, `submit`): every version's batcher counts the rows queued, running, and reserved by
requests admitted before their body was read, at the drain rate it measures (seeded at load by a timed
call, so that the first burst is judged too). A request whose rows could not be through in time is
refused at once; see app/engine/batching/.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from prometheus_client.core import Metric

from app.core.config import Settings
from app.engine.api import Engine, IndexEntry, Reservation, VersionStats
from app.engine.batching import DynamicBatcher, Feed
from app.engine.catalog import Catalog
from app.engine.manager import RepositoryManager
from app.engine.model import InspectResult
from app.engine.served import ServedVersion
from app.engine.session import default_intra_op_threads
from app.engine.types import EngineObserver

__all__ = ["LocalEngine", "RepositoryManager", "ServedVersion"]

T = TypeVar("T")
MAX_VERSIONS = 64  # versions whose calls the forecast pool has threads for at once


class LocalEngine(Engine):
    """The engine in this process: the repository manager (which versions are served, and when) and the
    routing of each call to its version's host. `alone()`: whether a small call may run inline on the event
    loop now (nothing else in flight; app/engine/batching/inline.py); by default, when no other submit is
    being handled here (an engine process: every request reaches it as a submit). `observer`: what it
    reports its events and state to (the metrics, app/engine/types.py's EngineObserver)."""

    def __init__(
        self,
        settings: Settings,
        *,
        observer: EngineObserver | None = None,
        alone: Callable[[], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.observer = observer
        self.submits_in_flight = 0
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rsa-aux")
        # Threads start on demand, so the bound costs nothing until versions (loaded at any time) use it:
        # room for MAX_VERSIONS versions' side-by-side calls.
        calls = settings.single_thread_calls or default_intra_op_threads()
        self.forecast_executor = ThreadPoolExecutor(
            max_workers=MAX_VERSIONS * calls, thread_name_prefix="rsa-forecast"
        )
        self.repository = RepositoryManager(
            settings,
            observer,
            alone if alone is not None else lambda: self.submits_in_flight <= 1,
            self.forecast_executor,
        )

    def describe(self) -> dict[str, Any]:
        return {"engine": "local", "repository": str(self.settings.model_repository)}

    @property
    def catalog(self) -> Catalog:
        return self.repository.catalog

    def on_catalog(self, listener: Callable[[Catalog], None]) -> None:
        self.repository.on_catalog(listener)

    async def start(self) -> None:
        """Discover the repository and load it in the background; with RSA_MODEL_CONTROL=poll, rescan it
        every RSA_POLL_S from then on."""
        await self.repository.start()

    async def stop(self, drain_timeout_s: float = 5.0) -> None:
        """Drain and stop every batcher (queued requests still run, for up to `drain_timeout_s`), then
        the thread pools."""
        await self.repository.stop(drain_timeout_s)
        for executor in (self.forecast_executor, self.executor):
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    async def run_blocking(self, fn: Callable[..., T], *args: object) -> T:
        """Run a blocking call (loading, inspection) off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    # -- serving -----------------------------------------------------------------------------------
    def get(self, name: str, version: int | None = None) -> ServedVersion:
        """A ready version as the engine holds it (the latest when `version` is None), or a domain error."""
        return self.repository.get(name, version)

    def _batcher(self, name: str, version: int) -> DynamicBatcher:
        """The version's batcher: a ready version's, or an unloading one's, whose requests resolved it before
        it left the catalog's choices and are let through until it stops (`_unload_version`)."""
        served = self.repository.models.get(name)
        sv = served.versions.get(version) if served is not None else None
        if sv is not None and sv.state == "unloading" and sv.batcher is not None:
            return sv.batcher
        sv = self.get(name, version)  # the error a version that is not ready deserves
        assert sv.batcher is not None  # ready versions have one
        return sv.batcher

    def judge(self, name: str, version: int, rows: int, timeout_s: float) -> None:
        self._batcher(name, version).judge(rows, timeout_s)  # raises Overloaded

    async def admit(
        self, name: str, version: int | None, rows: int, timeout_s: float, since: float | None = None
    ) -> Reservation | None:
        entry = self.catalog.find_ready(name, version)
        if entry is None:
            return None
        batcher = self._batcher(entry.name, entry.version)
        key = batcher.reserve(rows, timeout_s, since)  # raises Overloaded
        return Reservation(key, entry.name, entry.version, rows)

    def backlog(self, name: str, version: int) -> tuple[int, float | None]:
        """(rows admitted and not yet answered, seconds per row) of a version: what a front end admits
        small requests against without asking (app/engine/client.py)."""
        sv = self.repository.models[name].versions.get(version) if name in self.repository.models else None
        return sv.host.backlog() if sv is not None and sv.host is not None else (0, None)

    def release(self, reservation: Reservation) -> None:
        served = self.repository.models.get(reservation.name)
        sv = served.versions.get(reservation.version) if served is not None else None
        if sv is not None and sv.batcher is not None:
            sv.batcher.release(reservation.id)

    async def submit(
        self,
        name: str,
        version: int,
        feed: Feed,
        timeout_s: float,
        reservation: Reservation | None = None,
        evaluation: bool = False,
    ) -> np.ndarray:
        batcher = self._batcher(name, version)
        self.submits_in_flight += 1
        try:
            key = None if reservation is None else reservation.id
            return await batcher.submit(feed, timeout_s, key, evaluation)
        finally:
            self.submits_in_flight -= 1

    async def inspect(self, name: str, version: int, feed: Feed) -> InspectResult:
        model = self.get(name, version).model
        assert model is not None
        return await self.run_blocking(model.inspect_feed, feed)

    async def stats(self, name: str, version: int) -> VersionStats | None:
        served = self.repository.models.get(name)
        sv = served.versions.get(version) if served is not None else None
        return sv.host.stats() if sv is not None and sv.host is not None else None

    async def metric_families(self) -> list[Metric]:
        return self.observer.families(self.repository.snapshot()) if self.observer is not None else []

    # -- the model repository (RepositoryManager) ----------------------------------------------------
    async def index(self, ready_only: bool = False) -> list[IndexEntry]:
        return await self.repository.index(ready_only)

    async def load(self, name: str) -> None:
        await self.repository.load(name)

    async def unload(self, name: str) -> None:
        await self.repository.unload(name)
