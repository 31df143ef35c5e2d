"""The protocol-neutral inference service: forecast and inspect on the registry's models.

Arrays in, arrays out; every protocol's handlers (today `/v1`) decode their wire format into arrays,
call this, and encode what comes back. It raises domain errors only and knows no HTTP.

Deadlines: a request's deadline is set once, when it arrives (the request context, `app.core.context`),
and covers everything: parsing, the queue, the session and encoding. Work is sized against what is left
of it, never against a fresh timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import perf_counter
from typing import TypeVar

import numpy as np

from app.core.config import Settings
from app.core.context import current_deadline, note_model_version
from app.core.errors import Overloaded, Timeout
from app.inference.model import InspectResult
from app.inference.registry import ModelRegistry, ModelVersion, ServedModel

T = TypeVar("T")


class InferenceService:
    def __init__(self, registry: ModelRegistry, settings: Settings) -> None:
        self.registry = registry
        self.settings = settings
        self._inspect_in_flight = 0

    # -- models ------------------------------------------------------------------------------------
    def resolve(self, name: str, version: int | None) -> ModelVersion:
        """The ready version that serves this request ("latest" resolved), noted for the metrics."""
        mv = self.registry.get(name, version)
        note_model_version(mv.name, mv.version)
        return mv

    def models(self) -> list[ServedModel]:
        return list(self.registry.models.values())

    def model(self, name: str) -> ServedModel:
        return self.registry.model(name)

    def deadline(self) -> tuple[float, float]:
        """(seconds left, the whole budget) of this request; outside a request, a fresh timeout."""
        current = current_deadline()
        if current is None:
            return self.settings.request_timeout_s, self.settings.request_timeout_s
        deadline, budget = current
        return deadline - perf_counter(), budget

    def admit_early(self, name: str, version: int | None) -> None:
        """Before a forecast request's body is read: refuse (Overloaded) when the version's backlog alone
        cannot be through in time. Unknown, loading or failed versions pass: the request itself then
        gets the precise error."""
        mv = self.registry.find_ready(name, version)
        if mv is None or mv.batcher is None:
            return
        left, _ = self.deadline()
        try:
            mv.batcher.admit(1, left)
        except Overloaded:
            note_model_version(mv.name, mv.version)  # the refusal is labelled with the version it spares
            raise

    # -- forecast ----------------------------------------------------------------------------------
    async def forecast(self, mv: ModelVersion, windows: np.ndarray, phases: np.ndarray | None) -> np.ndarray:
        """[S, L, C] windows (and [S] phases for a cycle model) -> [S, H, C], through the batcher."""
        model, batcher = mv.model, mv.batcher
        assert model is not None and batcher is not None  # the registry hands out ready versions only
        left, budget = self._time_left(mv)
        try:
            return await batcher.submit(model.feed(windows, phases), left)
        except Timeout:
            raise Timeout(
                f"model {mv.name}: no result within the request's deadline of {budget:g}s", limit=budget
            ) from None

    # -- inspect -----------------------------------------------------------------------------------
    async def inspect(
        self,
        mv: ModelVersion,
        windows: np.ndarray,
        phases: np.ndarray | None,
        finish: Callable[[InspectResult], T],
    ) -> T:
        """The inspection session, then `finish` (encoding, rendering) on its result, in one worker
        thread call: at most `max_attention_in_flight` such calls (Overloaded above) and the request's
        deadline (Timeout). A call whose client timed out still holds its slot until its thread
        really finishes, so timeouts cannot pile up work behind the bound."""
        model = mv.model
        assert model is not None
        limit = self.settings.max_attention_in_flight
        if self._inspect_in_flight >= limit:
            raise Overloaded(
                f"model {mv.name}: {self._inspect_in_flight} attention calls in flight; retry later",
                limit=limit,
                retry_after_s=self.settings.retry_after_s,
            )
        timeout, budget = self._time_left(mv)

        def run() -> T:
            return finish(model.inspect(windows, phases))

        self._inspect_in_flight += 1
        call = asyncio.ensure_future(self.registry.run_blocking(run))
        call.add_done_callback(self._release_inspect_slot)
        try:
            return await asyncio.wait_for(asyncio.shield(call), timeout)
        except TimeoutError:
            raise Timeout(
                f"model {mv.name}: no attention result within the request's deadline of {budget:g}s",
                limit=budget,
            ) from None

    def _release_inspect_slot(self, call: asyncio.Future[object]) -> None:
        self._inspect_in_flight -= 1
        if not call.cancelled():
            call.exception()  # retrieved, so a call whose client timed out logs no "never retrieved"

    def _time_left(self, mv: ModelVersion) -> tuple[float, float]:
        left, budget = self.deadline()
        if left <= 0:
            raise Timeout(
                f"model {mv.name}: the request's deadline of {budget:g}s passed before it reached the model",
                limit=budget,
            )
        return left, budget
