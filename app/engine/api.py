"""The engine API: everything the front end (protocols, middleware, readiness, metrics) asks of the engine.

Two implementations: `LocalEngine` (app/engine/local.py: the sessions, queues, batching and admission in
this process) and `RemoteEngine` (app/engine/client.py: the same calls over a socket to an engine process,
app/engine/server.py). Front-end code is written against this class only, so it runs unchanged on either.
Calls raise domain errors (app/core/errors.py) and carry no HTTP or wire format: feeds are named numpy
arrays, one row per series, and answers are arrays.

Deadlines cross as seconds left (`timeout_s`): the front end set the deadline when the request arrived.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client.core import Metric

from app.engine.catalog import Catalog
from app.engine.types import Feed, InspectResult


@dataclass(frozen=True)
class Reservation:
    """Rows an early admission counted for a request whose body is not parsed yet (see `Engine.admit`)."""

    id: int
    name: str
    version: int
    rows: int


@dataclass(frozen=True)
class VersionStats:
    """A version's batching counters (GET /v1/models/{name})."""

    max_series_per_call: int
    session_calls: int
    rows: int
    failed_calls: int
    rejected_requests: int
    expired_requests: int
    dropped_requests: int


@dataclass(frozen=True)
class IndexEntry:
    """One row of the model repository's index (Triton's RepositoryIndex): a version on disk or served."""

    name: str
    version: int | None
    state: str  # READY, LOADING, UNLOADING, UNAVAILABLE (Triton's words)
    reason: str


class Engine(ABC):
    """What the engine does for the front end. Subclasses: LocalEngine, RemoteEngine."""

    @property
    @abstractmethod
    def catalog(self) -> Catalog:
        """The served versions now: an immutable snapshot, swapped whole when anything changes."""

    @abstractmethod
    def on_catalog(self, listener: Callable[[Catalog], None]) -> None:
        """`listener(catalog)` after every swap (metrics' label children, other front ends)."""

    @abstractmethod
    async def start(self) -> None:
        """Begin serving: discovery and loading go on in the background; returns at once."""

    @abstractmethod
    async def stop(self, drain_timeout_s: float) -> None:
        """Finish what is queued (within `drain_timeout_s`), then free everything."""

    @abstractmethod
    def judge(self, name: str, version: int, rows: int, timeout_s: float) -> None:
        """Raise Overloaded when `rows` more could not be through the session within `timeout_s` behind
        the work admitted so far; reserve nothing (a body's declared size, before it has arrived: only
        what arrives is reserved, `admit`)."""

    @abstractmethod
    async def admit(
        self, name: str, version: int | None, rows: int, timeout_s: float, since: float | None = None
    ) -> Reservation | None:
        """While a request's body is read: raise Overloaded when `rows` more (an estimate) could not be
        through the session within `timeout_s` given all the work admitted so far, queued, running or
        reserved (with `since`, the request's arrival: the work admitted before it only); else reserve
        them until the request submits or is released. None: nothing to reserve (a version not ready:
        the request itself then gets the precise error)."""

    @abstractmethod
    def release(self, reservation: Reservation) -> None:
        """The request will not submit (an error, a disconnect): its reserved rows stop counting."""

    @abstractmethod
    async def submit(
        self,
        name: str,
        version: int,
        feed: Feed,
        timeout_s: float,
        reservation: Reservation | None = None,
        evaluation: bool = False,
    ) -> np.ndarray:
        """The forecast [n, H, C] of a feed of n rows through the version's batcher (`evaluation`: a
        backtest's or an anomaly check's windows, in the version's evaluation queue)."""

    @abstractmethod
    async def inspect(self, name: str, version: int, feed: Feed) -> InspectResult:
        """The inspection graph's outputs for a feed. It runs to its end: the caller bounds how long it
        waits, and how many run (the inspection slots of app/inference/service.py)."""

    @abstractmethod
    async def stats(self, name: str, version: int) -> VersionStats | None:
        """The version's batching counters; None when it has no batcher (not loaded)."""

    @abstractmethod
    async def metric_families(self) -> list[Metric]:
        """The engine's own metrics now: batches, queues, backlog, load state, GPU memory."""

    # -- the model repository (Triton's repository extension) ---------------------------------------
    @abstractmethod
    async def index(self, ready_only: bool = False) -> list[IndexEntry]:
        """Every version on disk or served, with its state and why."""

    @abstractmethod
    async def load(self, name: str) -> None:
        """Load (or reload) a model's versions as its version policy says: new ones are loaded and warmed
        beside the served ones, which keep serving; `latest` moves only once the new one is ready. Raises
        InvalidModelName (the repository's name rule), ModelNotFound, TooManyVersions
        (RSA_MAX_LOADED_VERSIONS) or LoadFailed (a version's reason, RSA_LOAD_TIMEOUT_S included)."""

    @abstractmethod
    async def unload(self, name: str) -> None:
        """Stop admitting to the model's versions, finish what they have in flight, free them. Raises
        InvalidModelName or ModelNotFound."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the engine is (for logs): local or remote, its address."""
