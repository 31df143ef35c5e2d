"""The engine API over a socket: what a front end process uses when the engine runs in its own process.

One ZeroMQ DEALER socket to the engine's ROUTER (app/engine/server.py). Calls are numbered; a receiver
task hands each reply to its caller and applies the catalog the engine pushes after every change, so
`catalog` is the engine's, as of the last push. Domain errors raised in the engine are raised here again,
the same class with the same field and limit (app/engine/wire.py).

Liveness: the front end learns within a second or two that the engine is gone or not answering, two ways.
The socket's own events (a ZeroMQ socket monitor) say at once when the engine's end closes (it died);
a heartbeat says when it stops answering (stopped, or its event loop stuck): a `ping` every
RSA_ENGINE_HEARTBEAT_S, and any message from the engine answers it; one left unanswered for
RSA_ENGINE_HEARTBEAT_TIMEOUT_S makes the engine unavailable. Then every call waiting for an answer fails
at once with 503 `model_not_ready` and Retry-After, and so does every new one; readiness is 503 (the
catalog is the last one pushed, with its `error` saying why); metadata answers from that catalog without
batching counters, and /metrics without the engine's families (`rsa_engine_up` 0). The first message from
the engine afterwards makes it available again. A dead engine also ends the service (app/supervisor.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import zmq
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from zmq.utils.monitor import parse_monitor_message

from app.core.config import Settings
from app.core.errors import ModelNotReady
from app.engine.api import Engine, IndexEntry, Reservation, VersionStats
from app.engine.batching.admission import late_refusal
from app.engine.catalog import Catalog
from app.engine.types import Feed, InspectResult
from app.engine.wire import (
    Admit,
    Channel,
    Frames,
    Hello,
    Index,
    Inspect,
    Load,
    Metrics,
    Ping,
    Release,
    Request,
    Stats,
    Submit,
    Unload,
    decode,
    encode,
    raise_error,
    read_reservation,
    request_header,
)

logger = logging.getLogger(__name__)

# How long a front end waits for the engine's first answer at start-up (the supervisor starts the engine
# first; its socket is bound before it loads any model).
HELLO_TIMEOUT_S = 30.0
# Calls that wait for no queue (catalog, stats, metrics, admission) answer within this, or fail.
CONTROL_TIMEOUT_S = 10.0
# Requests of at most this many rows (estimated from their size) are admitted here, without a round trip.
LOCAL_ADMIT_ROWS = 16
# A scrape waits at most this long for the engine's families (they take milliseconds), then answers
# without them: /metrics must answer while the engine is stuck, before the heartbeat has said so.
METRICS_TIMEOUT_S = 1.0


class RemoteEngine(Engine):
    def __init__(self, address: str, settings: Settings) -> None:
        self.address = address
        self.settings = settings
        self._channel: Channel | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[tuple[dict[str, Any], dict[str, np.ndarray]]]] = {}
        self._catalog = Catalog()
        self._listeners: list[Callable[[Catalog], None]] = []
        # (model, version) -> (rows ahead, seconds per row, when), as the engine's last answer said
        self._backlog: dict[tuple[str, int], tuple[int, float | None, float]] = {}
        # Liveness: why the engine is unavailable (None: it answers), when this front end last read a
        # message from it, whether a ping waits for an answer, the heartbeat task and the socket monitor.
        self.unavailable: str | None = None
        self._last_heard = 0.0
        self._ping_waits = False
        self._heartbeat: asyncio.Task[None] | None = None
        self._monitor: Channel | None = None

    def describe(self) -> dict[str, Any]:
        return {"engine": "remote", "address": self.address}

    # -- the catalog -------------------------------------------------------------------------------
    @property
    def catalog(self) -> Catalog:
        """The engine's last catalog; while the engine is unavailable, with `error` saying so (not ready)."""
        if self.unavailable is not None:
            return replace(self._catalog, error=self.unavailable)
        return self._catalog

    def on_catalog(self, listener: Callable[[Catalog], None]) -> None:
        self._listeners.append(listener)

    def _set_catalog(self, wire: dict[str, Any]) -> None:
        catalog = Catalog.from_wire(wire)
        if catalog.generation < self._catalog.generation:
            return  # an older push overtaken by the hello's answer
        self._catalog = catalog
        for listener in self._listeners:
            try:
                listener(catalog)
            except Exception:
                logger.exception("a catalog listener failed")

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self._monitor = Channel(socket.get_monitor_socket(zmq.EVENT_DISCONNECTED), self._on_event)
        socket.connect(self.address)
        self._channel = Channel(socket, self._on_message)
        header, _ = await self._call(Hello(), wait_s=HELLO_TIMEOUT_S)
        self._set_catalog(header["catalog"])
        self._last_heard = time.monotonic()
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat(), name="engine-heartbeat")
        logger.info("front end connected to the engine at %s", self.address)

    async def stop(self, drain_timeout_s: float) -> None:
        """The engine is the supervisor's to stop; a front end only lets go of its socket."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        self._fail_pending("the front end is shutting down", retry_after_s=None)
        if self._channel is not None:
            if self._monitor is not None:
                self._monitor.close()
                with contextlib.suppress(zmq.ZMQError):
                    self._channel.socket.disable_monitor()
            self._channel.close()

    # -- liveness ----------------------------------------------------------------------------------
    async def _beat(self) -> None:
        """A ping every beat; silence judged every half beat: the engine is unavailable once a ping waits
        for its answer and nothing has come for the timeout (so detection takes the timeout plus at most
        half a beat, the engine's last answer having come at most a beat before it stopped)."""
        beat_s, timeout_s = self.settings.engine_heartbeat_s, self.settings.engine_heartbeat_timeout_s
        next_ping = 0.0
        while True:
            assert self._channel is not None
            # Answers that arrived while this event loop was busy elsewhere count: a front end that
            # stalled never blames the engine for its own delay.
            self._channel.drain()
            now = time.monotonic()
            if self._ping_waits and now - self._last_heard >= timeout_s:
                self._lose(f"the engine process has not answered for {now - self._last_heard:.1f}s")
            if now >= next_ping:
                self._ping_waits = True
                self._channel.send(encode(request_header(Ping(), 0)))
                next_ping = now + beat_s
            await asyncio.sleep(min(beat_s, timeout_s) / 2)

    def _on_event(self, frames: list[Any]) -> None:
        event = parse_monitor_message([f.bytes for f in frames])
        if event["event"] == zmq.EVENT_DISCONNECTED:
            self._lose("the engine process closed its socket (it is gone)")

    def _lose(self, why: str) -> None:
        """The engine is unavailable: everything waiting for it fails now, with a 503 to retry."""
        if self.unavailable is None:
            logger.error("front end: %s; answering 503 until it answers again", why)
        self.unavailable = why
        self._fail_pending(f"{why}; try again", retry_after_s=self.settings.retry_after_s)

    def _fail_pending(self, why: str, retry_after_s: int | None) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ModelNotReady(why, retry_after_s=retry_after_s))

    def _on_message(self, frames: list[Any]) -> None:
        self._last_heard, self._ping_waits = time.monotonic(), False  # anything answers the heartbeat
        if self.unavailable is not None:
            logger.warning("front end: the engine answers again")
            self.unavailable = None
        try:
            header, arrays = decode([f.buffer for f in frames])
        except Exception:
            logger.exception("engine client: an unreadable message")
            return
        if header.get("op") == "catalog":
            self._set_catalog(header["catalog"])
            return
        future = self._pending.pop(header.get("id", -1), None)  # ids count up from 0
        if future is not None and not future.done():
            future.set_result((header, arrays))

    def _send(self, frames: Frames) -> None:
        if self._channel is None:
            raise ModelNotReady("the front end is not connected to the engine", retry_after_s=1)
        if self.unavailable is not None:
            raise ModelNotReady(f"{self.unavailable}; try again", retry_after_s=self.settings.retry_after_s)
        self._channel.send(frames)

    async def _call(
        self, request: Request, arrays: Feed | None = None, *, wait_s: float = CONTROL_TIMEOUT_S
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Send `request` with its arrays; wait at most `wait_s` for the answer."""
        rid = next(self._ids)
        future: asyncio.Future[tuple[dict[str, Any], dict[str, np.ndarray]]] = (
            asyncio.get_running_loop().create_future()
        )
        self._pending[rid] = future
        try:
            self._send(encode(request_header(request, rid), arrays))
            header, out = await asyncio.wait_for(future, wait_s)
        except TimeoutError:
            raise ModelNotReady(
                f"the engine did not answer {request.OP} within {wait_s:g}s", retry_after_s=1
            ) from None
        finally:
            self._pending.pop(rid, None)
        if "error" in header:
            raise_error(header["error"])
        return header, out

    # -- serving -----------------------------------------------------------------------------------
    def judge(self, name: str, version: int, rows: int, timeout_s: float) -> None:
        """By the engine's rule, on the backlog the engine last reported for the version (aged by its
        drain rate); no round trip."""
        ahead, row_seconds, when = self._backlog.get((name, version), (0, None, 0.0))
        if row_seconds:  # what has drained since: the report ages, it never sticks
            ahead = max(0, ahead - int((time.perf_counter() - when) / row_seconds))
        refusal = late_refusal(name, ahead, rows, row_seconds, timeout_s)
        if refusal is not None:
            raise refusal

    async def admit(
        self, name: str, version: int | None, rows: int, timeout_s: float, since: float | None = None
    ) -> Reservation | None:
        """Judged here first, by the engine's rule, on the backlog the engine last reported for the
        version (aged by its drain rate): a refusal here is one the engine would give too, since other
        front ends only add to that backlog. What passes: a small body is admitted (no round trip on
        every request; the engine judges it again when it submits), a big one asks the engine, which
        reserves its rows while the body is read and parsed. With `since` (a body reserved as it
        arrives, judged behind the work admitted before it only) the engine alone judges: the last report
        counts every reservation, later requests' too."""
        entry = self._catalog.find_ready(name, version)
        if entry is not None and since is None:
            self.judge(entry.name, entry.version, rows, timeout_s)
        if rows <= LOCAL_ADMIT_ROWS:
            return None
        header, _ = await self._call(Admit(name, version, rows, timeout_s, since))
        if entry is not None and header["backlog"] is not None:
            self._note_backlog(entry.name, entry.version, header["backlog"])
        if "refused" in header:
            raise_error(header["refused"])
        made = header["reservation"]
        return None if made is None else read_reservation(made)

    def _note_backlog(self, name: str, version: int, backlog: list[Any]) -> None:
        ahead, row_seconds = backlog
        self._backlog[(name, version)] = (ahead, row_seconds, time.perf_counter())

    def release(self, reservation: Reservation) -> None:
        frames = encode(request_header(Release(reservation), None))  # no id: no answer
        if self.unavailable is None:
            self._send(frames)  # no answer: the rows stop counting, or expire

    async def submit(
        self,
        name: str,
        version: int,
        feed: Feed,
        timeout_s: float,
        reservation: Reservation | None = None,
        evaluation: bool = False,
    ) -> np.ndarray:
        # The engine keeps the deadline (a Timeout comes back from it); the answer's trip is given a second.
        header, out = await self._call(
            Submit(name, version, timeout_s, reservation, evaluation), feed, wait_s=timeout_s + 1.0
        )
        self._note_backlog(name, version, header["backlog"])
        return out["forecast"]

    async def inspect(self, name: str, version: int, feed: Feed) -> InspectResult:
        _, out = await self._call(Inspect(name, version), feed, wait_s=self.settings.request_timeout_s)
        return InspectResult(**out)

    async def stats(self, name: str, version: int) -> VersionStats | None:
        """The engine's counters; None while it is unavailable (metadata answers from the catalog)."""
        try:
            header, _ = await self._call(Stats(name, version))
        except ModelNotReady:
            if self.unavailable is None:
                raise
            return None
        return None if header["stats"] is None else VersionStats(**header["stats"])

    async def metric_families(self) -> list[Metric]:
        """The engine's families and `rsa_engine_up`; only the latter (0) when the engine is unavailable
        or does not answer within METRICS_TIMEOUT_S."""
        try:
            header, _ = await self._call(Metrics(), wait_s=METRICS_TIMEOUT_S)
        except ModelNotReady as exc:
            logger.warning("/metrics without the engine's families: %s", exc.message)
            return [engine_up(False)]
        return [*text_string_to_metric_families(header["text"]), engine_up(self.unavailable is None)]

    async def index(self, ready_only: bool = False) -> list[IndexEntry]:
        header, _ = await self._call(Index(ready_only))
        return [IndexEntry(**entry) for entry in header["index"]]

    async def load(self, name: str) -> None:
        # the engine gives up on a load at RSA_LOAD_TIMEOUT_S and answers why: wait a little longer
        await self._call(Load(name), wait_s=self.settings.load_timeout_s + CONTROL_TIMEOUT_S)

    async def unload(self, name: str) -> None:
        # a load of the model in progress first (up to RSA_LOAD_TIMEOUT_S), then its requests finish
        wait_s = self.settings.load_timeout_s + max(CONTROL_TIMEOUT_S, self.settings.request_timeout_s)
        await self._call(Unload(name), wait_s=wait_s)


def engine_up(up: bool) -> Metric:
    """Whether the engine process answers the scraped front end's heartbeat (RSA_WORKERS > 1 only)."""
    return GaugeMetricFamily(
        "rsa_engine_up",
        "1 while the engine process answers this front end (its socket open, its heartbeat answered), else 0 "
        "(requests get 503 meanwhile). Exported with RSA_WORKERS > 1 only.",
        value=1 if up else 0,
    )
