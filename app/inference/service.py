"""The protocol-neutral inference service: forecast and inspect, for every protocol, on the engine API.

Arrays in, arrays out; every protocol's handlers decode their wire format into arrays (with the rules of
app/inference/windows.py), call this, and encode what comes back. It raises domain errors only and knows
no HTTP. It reads the engine's catalog and calls the engine (app/engine/api.py), local or remote alike.

Deadlines: a request's deadline is set once, when it arrives (the request context, `app.core.context`),
and covers everything: parsing, the queue, the session and encoding. Work is sized against what is left
of it, never against a fresh timeout.

Early admission: before a forecast's body is read, `admit_early` refuses it when the rows its declared size
says it holds could not clear in time behind the version's backlog, and reserves nothing. As the body
arrives, `BodyAdmission.arrived` reserves the rows of the bytes that came (asking the engine again each
time they double, and once complete): a body in flight counts against others only for what it really
sent, so a connection that declares 60 MB and sends 6 bytes holds one row, not the version (issue 32).
The reservation rides in the request context until `forecast` submits the parsed rows with it, or the
request ends and the middleware releases it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from time import perf_counter
from typing import Any, TypeVar

import numpy as np

from app.artifacts.feed import build_feed
from app.core.config import Settings
from app.core.context import current_deadline, note_model_version, note_reservation, take_reservation
from app.core.errors import ModelNotReady, Overloaded, Timeout
from app.engine.api import Engine, VersionStats
from app.engine.catalog import Catalog, ModelEntry, VersionEntry
from app.engine.types import InspectResult

T = TypeVar("T")

# Bytes a series' value takes in a JSON body at least as dense as clients send them ("12.345678," is 10;
# the flood that needed early reservations sent 7.6 per value): the early estimate of a body's rows errs
# towards more rows, hence towards refusing sooner under load (an idle version admits anything).
JSON_BYTES_PER_VALUE = 8
BINARY_BYTES_PER_VALUE = 4  # float32 tensors (OIP v2 binary data)


def estimated_rows(body_bytes: int | None, entry: VersionEntry, binary: bool, limit: int) -> int:
    """The series a body of this size holds at most, about (1 when its size is unknown)."""
    manifest = entry.manifest
    if body_bytes is None or manifest is None:
        return 1
    per_value = BINARY_BYTES_PER_VALUE if binary else JSON_BYTES_PER_VALUE
    per_row = manifest.input_length * manifest.n_channels * per_value
    return max(1, min(limit, body_bytes // per_row))


@dataclass
class BodyAdmission:
    """A forecast admitted on its headers, whose rows are reserved as its body arrives."""

    service: InferenceService
    entry: VersionEntry
    binary: bool
    received: int = 0  # body bytes so far
    asked: int = 0  # rows last reserved

    async def arrived(self, chunk_bytes: int, complete: bool) -> None:
        """`chunk_bytes` more of the body came (the last of it when `complete`): reserve the rows they
        hold when that doubles what is reserved, or it is the whole body (raises Overloaded)."""
        self.received += chunk_bytes
        rows = estimated_rows(
            self.received, self.entry, self.binary, self.service.settings.max_series_per_request
        )
        if self.asked and rows < 2 * self.asked and not (complete and rows > self.asked):
            return
        await self.service.reserve_rows(self.entry, rows)
        self.asked = rows


class InferenceService:
    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self._inspect_in_flight = 0
        self._evaluating: dict[tuple[str, int], int] = {}  # backtests and anomaly checks per version
        # Encoding and rendering of inspection answers (PNG figures): off the event loop, and apart from
        # the engine's own threads.
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rsa-render")

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- models ------------------------------------------------------------------------------------
    @property
    def catalog(self) -> Catalog:
        return self.engine.catalog

    def resolve(self, name: str, version: int | None) -> VersionEntry:
        """The ready version that serves this request ("latest" resolved), noted for the metrics."""
        entry = self.engine.catalog.resolve(name, version, self.settings.retry_after_s)
        note_model_version(entry.name, entry.version)
        return entry

    def models(self) -> list[ModelEntry]:
        return list(self.engine.catalog.models.values())

    def model(self, name: str) -> ModelEntry:
        return self.engine.catalog.model(name)

    async def stats(self, entry: VersionEntry) -> VersionStats | None:
        return await self.engine.stats(entry.name, entry.version)

    def deadline(self) -> tuple[float, float]:
        """(seconds left, the whole budget) of this request; outside a request, a fresh timeout."""
        current = current_deadline()
        if current is None:
            return self.settings.request_timeout_s, self.settings.request_timeout_s
        deadline, budget = current
        return deadline - perf_counter(), budget

    async def admit_early(
        self, name: str, version: int | None, body_bytes: int | None, binary: bool
    ) -> BodyAdmission | None:
        """Before a forecast request's body is read: refuse (Overloaded) when its rows, estimated from the
        body's declared size, could not be through in time behind all the work already admitted; reserve
        nothing yet (the body's `arrived` does, as it comes). None: unknown, loading or failed versions
        pass, and the request itself then gets the precise error."""
        entry = self.engine.catalog.find_ready(name, version)
        if entry is None:
            return None
        rows = estimated_rows(body_bytes, entry, binary, self.settings.max_series_per_request)
        left, _ = self.deadline()
        try:
            self.engine.judge(entry.name, entry.version, rows, left)
        except Overloaded:
            note_model_version(
                entry.name, entry.version
            )  # the refusal is labelled with the version it spares
            raise
        return BodyAdmission(self, entry, binary)

    async def reserve_rows(self, entry: VersionEntry, rows: int) -> None:
        """Reserve `rows` for the current request, in place of what it had reserved (raises Overloaded)."""
        previous = take_reservation(entry.name, entry.version)
        if previous is not None:
            self.engine.release(previous)
        left, _ = self.deadline()
        current = current_deadline()
        since = None if current is None else current[0] - current[1]  # when the request arrived
        try:
            reservation = await self.engine.admit(entry.name, entry.version, rows, left, since)
        except Overloaded:
            note_model_version(entry.name, entry.version)
            raise
        if reservation is not None:
            note_reservation(reservation)

    # -- forecast ----------------------------------------------------------------------------------
    async def forecast(
        self,
        entry: VersionEntry,
        windows: np.ndarray,
        phases: np.ndarray | None,
        latest: bool = False,
        covariates: np.ndarray | None = None,
        evaluation: bool = False,
    ) -> np.ndarray:
        """[S, L, C] windows (and [S] phases for a cycle model) -> [S, H, C], through the engine's batcher.
        `latest`: the request named no version, so if its version went away between resolving and
        submitting (an unload), the new latest serves it when it takes the same inputs. `evaluation`: a
        backtest's or an anomaly check's windows, in the version's evaluation queue (its own admission)."""
        assert entry.manifest is not None  # the catalog resolves ready versions only
        manifest = entry.manifest
        if manifest.panel is not None and manifest.panel.local_spec is not None:
            # A hybrid's feed fits its local models on every window (0.27 s for the 1,428 M3 monthly
            # series of 120 values, issue 43): off the event loop, so other requests are not held.
            feed = await asyncio.get_running_loop().run_in_executor(
                self._executor, build_feed, manifest, windows, phases, covariates
            )
        else:
            feed = build_feed(manifest, windows, phases, covariates)
        left, budget = self._time_left(entry)
        reservation = take_reservation(entry.name, entry.version)
        try:
            return await self.engine.submit(entry.name, entry.version, feed, left, reservation, evaluation)
        except Timeout:
            raise Timeout(
                f"model {entry.name}: no result within the request's deadline of {budget:g}s", limit=budget
            ) from None
        except ModelNotReady:
            now = self.engine.catalog.find_ready(entry.name, None) if latest else None
            if now is None or now.version == entry.version or not _same_inputs(now, entry):
                raise
            note_model_version(now.name, now.version)
            left, _ = self._time_left(now)
            return await self.engine.submit(now.name, now.version, feed, left, None, evaluation)

    @asynccontextmanager
    async def evaluating(self, entry: VersionEntry) -> AsyncIterator[None]:
        """One of the version's RSA_MAX_EVALUATIONS_IN_FLIGHT slots in this process for a whole backtest or
        anomaly check (an anomaly check's repair rounds included, which the engine's own count of
        evaluation submits would see as new ones); Overloaded naming the setting when none is free, before
        any window is built. The engine bounds the evaluation submits of every front end together."""
        key = (entry.name, entry.version)
        limit = self.settings.max_evaluations_in_flight
        held = self._evaluating.get(key, 0)
        if held >= limit:
            raise Overloaded(
                f"model {entry.name} is busy evaluating: {held} backtests or anomaly checks in flight, the "
                f"limit (RSA_MAX_EVALUATIONS_IN_FLIGHT = {limit}); retry later",
                limit=limit,
                retry_after_s=self.settings.retry_after_s,
            )
        self._evaluating[key] = held + 1
        try:
            yield
        finally:
            self._evaluating[key] -= 1
            if not self._evaluating[key]:
                del self._evaluating[key]

    # -- inspect -----------------------------------------------------------------------------------
    async def inspect(
        self,
        entry: VersionEntry,
        windows: np.ndarray,
        phases: np.ndarray | None,
        finish: Callable[[InspectResult], T],
        covariates: np.ndarray | None = None,
    ) -> T:
        """The inspection graph, then `finish` (encoding, rendering) on its result in a worker thread: at
        most `max_attention_in_flight` such calls (Overloaded above) and the request's deadline (Timeout).
        A call whose client timed out still holds its slot until it really finishes, so timeouts cannot
        pile up work behind the bound. `covariates`: a global covariate model's rows, as a forecast's."""
        assert entry.manifest is not None
        self._check_inspect_slot(entry)
        feed = build_feed(entry.manifest, windows, phases, covariates)

        async def run() -> T:
            result = await self.engine.inspect(entry.name, entry.version, feed)
            return await asyncio.get_running_loop().run_in_executor(self._executor, finish, result)

        return await self._in_inspect_slot(entry, run)

    async def explain(
        self,
        entry: VersionEntry,
        compute: Callable[[np.ndarray | None], T],
        rows: np.ndarray | None = None,
        covariates: np.ndarray | None = None,
    ) -> T:
        """A global model's inspection (app/inference/explain.py), in the same slots and deadline as
        `inspect`: `compute` runs in a worker thread, on the forecasts [n, H, 1] of `rows` (windows
        [n, W, 1] through the served graph, with their `covariates`) when rows are given, else on None."""
        assert entry.manifest is not None
        self._check_inspect_slot(entry)

        async def run() -> T:
            outputs = None
            if rows is not None:
                outputs = await self.forecast(entry, rows, None, covariates=covariates)
            return await asyncio.get_running_loop().run_in_executor(self._executor, compute, outputs)

        return await self._in_inspect_slot(entry, run)

    def _check_inspect_slot(self, entry: VersionEntry) -> None:
        limit = self.settings.max_attention_in_flight
        if self._inspect_in_flight >= limit:
            raise Overloaded(
                f"model {entry.name}: {self._inspect_in_flight} attention calls in flight; retry later",
                limit=limit,
                retry_after_s=self.settings.retry_after_s,
            )

    async def _in_inspect_slot(self, entry: VersionEntry, run: Callable[[], Awaitable[T]]) -> T:
        timeout, budget = self._time_left(entry)
        self._inspect_in_flight += 1
        call = asyncio.ensure_future(run())
        call.add_done_callback(self._release_inspect_slot)
        try:
            return await asyncio.wait_for(asyncio.shield(call), timeout)
        except TimeoutError:
            raise Timeout(
                f"model {entry.name}: no attention result within the request's deadline of {budget:g}s",
                limit=budget,
            ) from None

    def _release_inspect_slot(self, call: asyncio.Future[Any]) -> None:
        self._inspect_in_flight -= 1
        if not call.cancelled():
            call.exception()  # retrieved, so a call whose client timed out logs no "never retrieved"

    def _time_left(self, entry: VersionEntry) -> tuple[float, float]:
        left, budget = self.deadline()
        if left <= 0:
            raise Timeout(
                f"model {entry.name}: the request's deadline of {budget:g}s passed before it reached the "
                "model",
                limit=budget,
            )
        return left, budget


def _same_inputs(a: VersionEntry, b: VersionEntry) -> bool:
    """Whether windows decoded for `b` feed `a` as they are."""
    ma, mb = a.manifest, b.manifest
    return (
        ma is not None
        and mb is not None
        and (ma.input_length, ma.channels, ma.cycle, ma.horizon, ma.panel)
        == (mb.input_length, mb.channels, mb.cycle, mb.horizon, mb.panel)
    )
