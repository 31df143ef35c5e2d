"""The engine process's side of the engine API: a LocalEngine behind a ZeroMQ ROUTER socket.

Each front end is a DEALER (app/engine/client.py). Every message is handled in a task of its own, so a
submit waits in its version's batcher beside every other front end's submits (batches merge across
front ends) while the socket keeps being read. Replies go back to the front end that asked, with the
request's id; catalog changes are pushed to every front end that said hello, in order with the replies
(one socket, one event loop), so a front end sees a version leave the catalog before any refusal of it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from typing import Any

import numpy as np
import zmq
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest

from app.core.errors import Overloaded, ServiceError
from app.engine.api import Reservation
from app.engine.catalog import Catalog
from app.engine.local import LocalEngine
from app.engine.wire import Channel, Frames, decode, encode, error_header
from app.observability.metrics import _Families

logger = logging.getLogger(__name__)


class EngineServer:
    def __init__(self, engine: LocalEngine, address: str) -> None:
        self.engine = engine
        self.address = address
        self._front_ends: set[bytes] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._channel: Channel | None = None
        self.submits_in_flight = 0  # what the engine's inline rule asks (app/engine/batching.py)

    async def start(self) -> None:
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        socket.bind(self.address)
        self._channel = Channel(socket, self._on_message)
        self.engine.on_catalog(self._push)
        logger.info("engine listening on %s", self.address)

    async def stop(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._channel is not None:
            self._channel.close()

    def _send(self, identity: bytes, frames: Frames) -> None:
        assert self._channel is not None
        self._channel.send([identity, *frames])

    def _push(self, catalog: Catalog) -> None:
        """Every front end gets the new catalog before any later reply (sent now, on this thread)."""
        frames = encode({"op": "catalog", "catalog": catalog.to_wire()})
        for identity in self._front_ends:
            self._send(identity, frames)

    def _on_message(self, frames: list[Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._handle(frames[0].bytes, frames[1:]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, identity: bytes, frames: list[Any]) -> None:
        rid: int | None = None
        try:
            header, arrays = decode([f.buffer for f in frames])
            rid = header.get("id")
            reply, out = await self._dispatch(identity, header, arrays)
            message = encode({"id": rid, "ok": True, **reply}, out)
        except ServiceError as exc:
            message = encode({"id": rid, "error": error_header(exc)})
        except Exception as exc:  # a bug: the caller gets a 500, the engine keeps serving
            logger.exception("engine: a request failed")
            message = encode(
                {"id": rid, "error": {"type": "InferenceError", "message": f"engine error: {exc}"}}
            )
        if rid is not None:
            self._send(identity, message)

    async def _dispatch(
        self, identity: bytes, header: dict[str, Any], arrays: dict[str, np.ndarray]
    ) -> tuple[dict[str, Any], dict[str, np.ndarray] | None]:
        engine, op = self.engine, header["op"]
        if op == "submit":
            reservation = header.get("reservation")
            self.submits_in_flight += 1
            try:
                out = await engine.submit(
                    header["name"],
                    header["version"],
                    arrays,
                    header["timeout_s"],
                    None if reservation is None else Reservation(*reservation),
                )
            finally:
                self.submits_in_flight -= 1
            # the version's backlog now, for the front end's own admission of small requests
            return {"backlog": engine.backlog(header["name"], header["version"])}, {"forecast": out}
        if op == "admit":
            entry = engine.catalog.find_ready(header["name"], header["version"])
            # the version's backlog rides on the answer, a refusal's included: the front end refuses the
            # next big bodies of a flood itself, without a round trip each
            backlog = None if entry is None else engine.backlog(entry.name, entry.version)
            try:
                made = await engine.admit(
                    header["name"],
                    header["version"],
                    header["rows"],
                    header["timeout_s"],
                    header.get("since"),
                )
            except Overloaded as exc:
                return {"refused": error_header(exc), "backlog": backlog}, None
            reservation = None if made is None else [made.id, made.name, made.version, made.rows]
            return {"reservation": reservation, "backlog": backlog}, None
        if op == "release":
            engine.release(Reservation(*header["reservation"]))
            return {}, None
        if op == "inspect":
            result = await engine.inspect(header["name"], header["version"], arrays)
            return {}, asdict(result)
        if op == "hello":
            self._front_ends.add(identity)
            return {"catalog": engine.catalog.to_wire()}, None
        if op == "stats":
            stats = await engine.stats(header["name"], header["version"])
            return {"stats": None if stats is None else asdict(stats)}, None
        if op == "metrics":
            registry = CollectorRegistry()
            registry.register(_Families(await engine.metric_families()))
            # OpenMetrics: unlike the Prometheus text format it keeps each family's type (info, counter)
            return {"text": generate_latest(registry).decode()}, None
        if op == "index":
            return {"index": [asdict(e) for e in await engine.index(header.get("ready_only", False))]}, None
        if op == "load":
            await engine.load(header["name"])
            return {}, None
        if op == "unload":
            await engine.unload(header["name"])
            return {}, None
        if op == "ping":
            return {}, None
        raise ValueError(f"unknown engine op {op!r}")
