"""Start-up and shutdown: what the service does between its first and its last request.

Start-up (the lifespan): read the settings, build the metrics, the engine (app/engine: in this process,
or a client of the engine process when the supervisor started this one as a front end), the inference
service and the protocol handlers into one `Runtime` (app/runtime.py); the engine loads and warms up
every model version in the background, so /healthz answers at once and /readyz turns 200 when all are
ready.

Shutdown is a drain, in this order, so that no accepted request is lost:
1. SIGTERM: `Lifecycle.begin_drain()`. /readyz answers 503 (load balancers stop sending new work) and
   every response carries `Connection: close` (clients stop reusing their keep-alive connections and
   reconnect, to another replica), for RSA_DRAIN_DELAY_S, while the service keeps serving.
2. `Lifecycle.begin_stop()`: the HTTP server stops accepting connections and the gRPC server (when
   RSA_GRPC_PORT is set; it answers ServerReady false from step 1) stops accepting calls, both at once;
   requests and calls in flight finish, side by side, within RSA_GRACEFUL_SHUTDOWN_S. gRPC stops here
   rather than in the lifespan's end, which uvicorn reaches only after its own wait: it would take new
   calls through that whole wait, then wait a second grace period, past compose's stop_grace_period.
3. The lifespan ends: the batchers finish what is queued, within what is left of the grace period since
   step 2; the thread pools and the parse process stop, the process exits 0.
`app/__main__.py` drives steps 1 and 2 from the signals; under another server, both happen when the
lifespan ends.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from time import monotonic

from fastapi import FastAPI

from app.core.config import Settings, get_settings
from app.core.context import requests_in_flight
from app.core.logging import configure_logging
from app.core.offload import ParseProcess
from app.core.security import ApiKeys
from app.engine.api import Engine
from app.inference.service import InferenceService
from app.observability.metrics import MULTIPROC_ENV, RequestMetrics, watch_loop_lag
from app.protocols.registry import Registry
from app.runtime import Runtime
from app.wiring import local_engine

logger = logging.getLogger(__name__)


class Lifecycle:
    """Whether the service is draining, and since when; shared by the server, readiness and middleware.
    Also what else stops when the HTTP server stops accepting (`on_stop`, `begin_stop`)."""

    def __init__(self) -> None:
        self.drain_started: float | None = None
        self.stop_started: float | None = None
        self._stoppers: list[Callable[[], Awaitable[None]]] = []
        self._stopping: list[asyncio.Future[None]] = []

    @property
    def draining(self) -> bool:
        return self.drain_started is not None

    def begin_drain(self) -> None:
        if self.drain_started is None:
            self.drain_started = monotonic()
            logger.info("draining: readiness is 503 and responses say Connection: close")

    def on_stop(self, stop: Callable[[], Awaitable[None]]) -> None:
        """`stop()` runs when the service stops accepting work (`begin_stop`)."""
        self._stoppers.append(stop)

    def begin_stop(self) -> None:
        """The HTTP server stops accepting now: every other server stops with it, on this event loop,
        while the HTTP server waits for its requests in flight."""
        if self.stop_started is not None:
            return
        self.begin_drain()
        self.stop_started = monotonic()
        self._stopping = [asyncio.ensure_future(stop()) for stop in self._stoppers]

    async def stopped(self, grace_s: float) -> float:
        """Once every `on_stop` has finished (begun now if `begin_stop` was not called): the seconds left
        of `grace_s` since the stop began, for what still has to stop."""
        self.begin_stop()
        await asyncio.gather(*self._stopping, return_exceptions=True)
        assert self.stop_started is not None
        return max(0.0, grace_s - (monotonic() - self.stop_started))


def build_engine(settings: Settings) -> Engine:
    """The engine this process talks to: an engine process's (RSA_ENGINE_ADDRESS, set by the supervisor
    for its front ends) or one in this process."""
    if settings.engine_address:
        from app.engine.client import RemoteEngine

        return RemoteEngine(settings.engine_address, settings)
    # Inline calls (app/engine/batching/): only when no other request is in flight in this process.
    return local_engine(settings, alone=lambda: requests_in_flight() <= 1)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings_override or get_settings()
    protocols: Registry = app.state.protocols
    configure_logging(settings.log_level)
    model_endpoints = tuple(
        p for p in app.openapi()["paths"] if p.endswith(("/forecast", "/attention", "/infer"))
    )
    multiprocess = os.environ.get(MULTIPROC_ENV)
    metrics = RequestMetrics(
        protocols.protocol_of, model_endpoints, Path(multiprocess) if multiprocess else None
    )
    engine = build_engine(settings)
    engine.on_catalog(metrics.on_catalog)
    service = InferenceService(engine, settings)
    lifecycle: Lifecycle = app.state.lifecycle
    parse_process = ParseProcess(settings.parse_process_min_bytes)
    runtime = Runtime(
        settings=settings,
        engine=engine,
        service=service,
        metrics=metrics,
        api_keys=ApiKeys.from_settings(
            [key.get_secret_value() for key in settings.api_keys], settings.api_keys_file
        ),
        parse_process=parse_process,
        handlers=protocols.build_handlers(service, lambda: lifecycle.draining),
    )
    # The parsers the routes hand big bodies to (their `offload=`): the parse process imports their
    # modules as it starts.
    starting = asyncio.create_task(
        parse_process.start(tuple(lane.__module__ for lane in protocols.parsers)), name="parse-process"
    )
    await engine.start()
    metrics.on_catalog(engine.catalog)
    app.state.runtime = runtime
    logger.info(
        "serving from %s (%s): %s",
        settings.model_repository,
        engine.describe()["engine"],
        ", ".join(f"{m.name} {sorted(m.versions)}" for m in engine.catalog.models.values()) or "nothing yet",
    )
    lag = asyncio.create_task(watch_loop_lag(metrics.loop_lag), name="loop-lag")  # rsa_event_loop_lag_seconds
    try:
        for protocol in protocols.protocols:  # servers beside HTTP: OIP v2's gRPC with RSA_GRPC_PORT
            for make_server in protocol.servers:
                server = make_server(runtime)
                if server is None:
                    continue
                await server.start()  # a port that cannot be bound stops start-up, after the cleanup below
                # in-flight calls finish (within the grace period), new ones refused: with HTTP's own wait
                lifecycle.on_stop(server.stop)
        yield
    finally:
        left_s = await lifecycle.stopped(settings.graceful_shutdown_s)
        lag.cancel()
        await asyncio.gather(starting, lag, return_exceptions=True)
        await engine.stop(left_s)
        service.close()
        await asyncio.to_thread(parse_process.stop)
        app.state.runtime = None
        logger.info("stopped")
