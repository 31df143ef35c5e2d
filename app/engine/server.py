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
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import zmq

from app.core.errors import Overloaded, ServiceError
from app.engine import wire
from app.engine.catalog import Catalog
from app.engine.local import LocalEngine

logger = logging.getLogger(__name__)

Arrays = dict[str, np.ndarray]
Reply = tuple[dict[str, Any], dict[str, np.ndarray] | None]  # the reply's header fields and arrays


class EngineServer:
    def __init__(self, engine: LocalEngine, address: str) -> None:
        self.engine = engine
        self.address = address
        self._front_ends: set[bytes] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._channel: wire.Channel | None = None
        # request class -> its handler (each takes its own class: the table is typed per entry by hand)
        self._handlers: dict[type[wire.Request], Callable[[bytes, Any, Arrays], Awaitable[Reply]]] = {
            wire.Hello: self._hello,
            wire.Ping: self._ping,
            wire.Admit: self._admit,
            wire.Release: self._release,
            wire.Submit: self._submit,
            wire.Inspect: self._inspect,
            wire.Stats: self._stats,
            wire.Metrics: self._metrics,
            wire.Index: self._index,
            wire.Load: self._load,
            wire.Unload: self._unload,
        }

    async def start(self) -> None:
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        socket.bind(self.address)
        self._channel = wire.Channel(socket, self._on_message)
        self.engine.on_catalog(self._push)
        logger.info("engine listening on %s", self.address)

    async def stop(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._channel is not None:
            self._channel.close()

    def _send(self, identity: bytes, frames: wire.Frames) -> None:
        assert self._channel is not None
        self._channel.send([identity, *frames])

    def _push(self, catalog: Catalog) -> None:
        """Every front end gets the new catalog before any later reply (sent now, on this thread)."""
        frames = wire.encode({"op": "catalog", "catalog": catalog.to_wire()})
        for identity in self._front_ends:
            self._send(identity, frames)

    def _on_message(self, frames: list[Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._handle(frames[0].bytes, frames[1:]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, identity: bytes, frames: list[Any]) -> None:
        rid: int | None = None
        try:
            header, arrays = wire.decode([f.buffer for f in frames])
            rid = header.get("id")
            request = wire.read_request(header)
            handler = self._handlers[type(request)]
            reply, out = await handler(identity, request, arrays)
            message = wire.encode({"id": rid, "ok": True, **reply}, out)
        except ServiceError as exc:
            message = wire.encode({"id": rid, "error": wire.error_header(exc)})
        except Exception as exc:  # a bug: the caller gets a 500, the engine keeps serving
            logger.exception("engine: a request failed")
            message = wire.encode(
                {"id": rid, "error": {"type": "InferenceError", "message": f"engine error: {exc}"}}
            )
        if rid is not None:
            self._send(identity, message)

    # -- one handler per request class: (reply fields, reply arrays) -------------------------------------
    async def _submit(self, identity: bytes, request: wire.Submit, arrays: Arrays) -> Reply:
        engine = self.engine
        out = await engine.submit(
            request.name, request.version, arrays, request.timeout_s, request.reservation, request.evaluation
        )
        # the version's backlog now, for the front end's own admission of small requests
        return {"backlog": engine.backlog(request.name, request.version)}, {"forecast": out}

    async def _admit(self, identity: bytes, request: wire.Admit, arrays: Arrays) -> Reply:
        engine = self.engine
        entry = engine.catalog.find_ready(request.name, request.version)
        # the version's backlog rides on the answer, a refusal's included: the front end refuses the
        # next big bodies of a flood itself, without a round trip each
        backlog = None if entry is None else engine.backlog(entry.name, entry.version)
        try:
            made = await engine.admit(
                request.name, request.version, request.rows, request.timeout_s, request.since
            )
        except Overloaded as exc:
            return {"refused": wire.error_header(exc), "backlog": backlog}, None
        return {"reservation": None if made is None else asdict(made), "backlog": backlog}, None

    async def _release(self, identity: bytes, request: wire.Release, arrays: Arrays) -> Reply:
        self.engine.release(request.reservation)
        return {}, None

    async def _inspect(self, identity: bytes, request: wire.Inspect, arrays: Arrays) -> Reply:
        return {}, asdict(await self.engine.inspect(request.name, request.version, arrays))

    async def _hello(self, identity: bytes, request: wire.Hello, arrays: Arrays) -> Reply:
        self._front_ends.add(identity)
        return {"catalog": self.engine.catalog.to_wire()}, None

    async def _stats(self, identity: bytes, request: wire.Stats, arrays: Arrays) -> Reply:
        stats = await self.engine.stats(request.name, request.version)
        return {"stats": None if stats is None else asdict(stats)}, None

    async def _metrics(self, identity: bytes, request: wire.Metrics, arrays: Arrays) -> Reply:
        return {"text": wire.openmetrics_text(await self.engine.metric_families())}, None

    async def _index(self, identity: bytes, request: wire.Index, arrays: Arrays) -> Reply:
        return {"index": [asdict(e) for e in await self.engine.index(request.ready_only)]}, None

    async def _load(self, identity: bytes, request: wire.Load, arrays: Arrays) -> Reply:
        await self.engine.load(request.name)
        return {}, None

    async def _unload(self, identity: bytes, request: wire.Unload, arrays: Arrays) -> Reply:
        await self.engine.unload(request.name)
        return {}, None

    async def _ping(self, identity: bytes, request: wire.Ping, arrays: Arrays) -> Reply:
        return {}, None
