"""ASGI middleware."""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from time import perf_counter
from typing import Any

from starlette.datastructures import Headers
from starlette.middleware.body_limit import RequestBodyLimitResponder
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.dispatch import forecast_route
from app.api.errors import error_response_for, registry_of
from app.core.context import RequestRecord, close_record, open_record
from app.core.errors import InvalidInput, Overloaded, PayloadTooLarge, ServiceError
from app.core.numbers import decimal
from app.engine.catalog import Catalog
from app.inference.service import BodyAdmission
from app.observability.metrics import UNMATCHED
from app.runtime import Runtime, maybe_runtime


class RuntimeMiddleware(ABC):
    """An HTTP middleware that needs the runtime (its settings, metrics, engine): anything else (lifespan,
    websockets, an app before its lifespan set a runtime) passes through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = maybe_runtime(scope["app"]) if scope["type"] == "http" else None
        if runtime is None:
            await self.app(scope, receive, send)
            return
        await self.handle(runtime, scope, receive, send)

    @abstractmethod
    async def handle(self, runtime: Runtime, scope: Scope, receive: Receive, send: Send) -> None:
        """The middleware's work on an HTTP request of a running app."""


class BodySizeLimitMiddleware(RuntimeMiddleware):
    """Caps request bodies at `settings.max_body_bytes` with a 413 in the usual error JSON.

    The limit is read per request from the runtime's settings (set by the lifespan), so building the app
    needs no settings. A declared Content-Length above the limit is refused before the body is read;
    a streamed body is counted by Starlette's responder, whose 413 FastAPI re-raises inside the route
    as an HTTPException that our handler renders.
    """

    async def handle(self, runtime: Runtime, scope: Scope, receive: Receive, send: Send) -> None:
        limit: int = runtime.settings.max_body_bytes
        raw = Headers(scope=scope).get("content-length")
        declared = None if raw is None else decimal(raw)
        if declared is not None and declared > limit:
            error = PayloadTooLarge.body(limit, declared)
            await error_response_for(scope["app"], scope["path"], error)(scope, receive, send)
            return
        if declared is not None:  # the server's HTTP parser delivers exactly that many bytes, no more
            await self.app(scope, receive, send)
            return
        await RequestBodyLimitResponder(self.app, limit)(scope, receive, send)


# Probes that load balancers and Prometheus call all the time: counted, but kept out of the in-flight
# gauge and the latency histogram so that they do not dilute what the dashboards show of real work.
# The service's own here; a protocol's (OIP v2's health) are its spec's `probes`.
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


# What the supervisor asks each front end on its private Unix socket (no client address there).
SUPERVISOR_PING = "/healthz"

# A client may shorten (never extend) the server's request timeout for its own request, in seconds.
TIMEOUT_HEADER = "x-request-timeout"


class RequestMiddleware(RuntimeMiddleware):
    """Opens each request's context with its deadline, then counts and times it; the outermost
    middleware, so it sees every status.

    The deadline is set here, on arrival: RSA_REQUEST_TIMEOUT_S, or less when the client's
    `X-Request-Timeout` header asks for less; it covers parsing, queue, session and encoding.
    The endpoint label is the matched route's path template (the router writes the route into the
    scope); model and version come from the request record the inference service fills in, or from
    the path when the registry knows that model (a validation error happens before the service runs).
    """

    async def handle(self, runtime: Runtime, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("client") is None and scope["path"] == SUPERVISOR_PING:
            await self.app(scope, receive, send)  # the supervisor's ping on the private socket: not traffic
            return
        metrics = runtime.metrics
        start = perf_counter()
        probe = scope["path"] in PROBE_PATHS or scope["path"] in registry_of(scope["app"]).probes
        status = 500  # if the app raises before answering, the server error handler answers 500
        timeout = runtime.settings.request_timeout_s
        asked, bad_header = _asked_timeout(scope)
        error: ServiceError | None = bad_header
        record, token = open_record(start, min(timeout, asked or timeout))
        if not probe:
            metrics.in_flight.inc()

        lifecycle = scope["app"].state.lifecycle

        admission: BodyAdmission | None = None

        # A refusal while the body still comes keeps the connection: uvicorn reads the rest and drops it,
        # so the client, still sending, reads its 503 (closed at once, a client still writing got a reset
        # and lost the answer: 42 of 120 in bench.workers' flood).
        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if lifecycle.draining:  # the client reconnects (elsewhere) rather than reuse this one
                    message["headers"] = [*message.get("headers", []), (b"connection", b"close")]
            await send(message)

        try:
            admitted = registry_of(scope["app"]).admitted
            if error is None and scope["method"] == "POST" and scope["path"].endswith(admitted.suffixes):
                error, admission = await _admission(scope, runtime, admitted.routes)
            if error is not None:
                await error_response_for(scope["app"], scope["path"], error)(scope, receive, send_wrapper)
            else:
                if admission is not None:
                    receive = _reserving(receive, admission)
                await self.app(scope, receive, send_wrapper)
        finally:
            close_record(token)
            if record.reservation is not None:  # admitted early, never submitted (an error, a disconnect)
                runtime.engine.release(record.reservation)
            try:
                endpoint, params = _route_of(scope)
                if not record.model:
                    _labels_from_path(runtime.engine.catalog, params, record)
                metrics.observe_request(endpoint, record, status, perf_counter() - start, probe)
            finally:
                # After the count: a scrape that reads no request in flight reads every answered one
                # counted (the answer reaches its client before this block runs).
                if not probe:
                    metrics.in_flight.dec()


async def _admission(
    scope: Scope, runtime: Runtime, routes: frozenset[str]
) -> tuple[Overloaded | None, BodyAdmission | None]:
    """A model call on a route its protocol admits (`ProtocolSpec.admitted`: /v1's forecast and OIP v2's
    infer; KServe's time series names its model in the body, read only after admission) is judged before
    its body is read: refused when its rows (estimated from the body's declared size) could not clear in
    time behind all the work already admitted. Under a sustained overload most requests are refusals,
    and reading and parsing each one first would take the event loop from the requests that are served,
    and leave the refusals of big bodies until they had been parsed. What passes reserves its rows as
    its body arrives (`_reserving`), never by the declared size alone: a body that stalls holds only
    what it sent."""
    endpoint, params = _route_of(scope)
    if endpoint not in routes or not isinstance(params.get("name"), str):
        return None, None
    headers = Headers(scope=scope)
    if runtime.api_keys.enabled:
        try:  # only a client allowed to forecast learns that the model is busy: others get 401/403
            runtime.api_keys.check(headers.get("authorization"))
        except ServiceError:
            return None, None
    raw_version = params.get("version")
    version = None if raw_version is None else decimal(str(raw_version))
    if raw_version is not None and version is None:
        return None, None  # the route's own validation answers that
    length = headers.get("content-length")
    binary = headers.get("inference-header-content-length") is not None  # OIP v2 binary tensors
    try:
        admission = await runtime.service.admit_early(
            params["name"], version, decimal(length) if length is not None else None, binary
        )
    except Overloaded as exc:
        return exc, None
    return None, admission


def _reserving(receive: Receive, admission: BodyAdmission) -> Receive:
    """`receive`, reserving the rows of the body's bytes as they arrive; a refusal (Overloaded) is raised
    to the route reading the body, which answers it."""

    async def reserving() -> Message:
        message = await receive()
        if message["type"] == "http.request":
            await admission.arrived(len(message.get("body", b"")), not message.get("more_body", False))
        return message

    return reserving


def _asked_timeout(scope: Scope) -> tuple[float | None, InvalidInput | None]:
    """The client's X-Request-Timeout in seconds, or the error its value deserves."""
    raw = Headers(scope=scope).get(TIMEOUT_HEADER)
    if raw is None:
        return None, None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        return None, InvalidInput(
            f"header X-Request-Timeout must be a positive number of seconds, got {raw!r}",
            field="header X-Request-Timeout",
            limit=0,
        )
    return seconds, None


def _route_of(scope: Scope) -> tuple[str, dict[str, Any]]:
    """The matched route's path template and path parameters. The router leaves them in the scope; a
    request refused before routing (a body over the size limit) is matched here, after the fact,
    against the documented paths (FastAPI's included routers do not expose their routes to match)."""
    route = scope.get("route")
    if route is not None:
        return route.path, scope.get("path_params") or {}
    forecast = forecast_route(scope["path"])  # the busiest routes, without a scan of the table below
    if forecast is not None:
        return forecast[0].path, forecast[1]
    app = scope["app"]
    table: list[tuple[re.Pattern[str], str]] | None = getattr(app.state, "route_table", None)
    if table is None:
        table = [(compile_path(path)[0], path) for path in app.openapi()["paths"]]
        app.state.route_table = table
    for regex, path in table:
        match = regex.match(scope["path"])
        if match:
            return path, match.groupdict()
    return UNMATCHED, {}


def _labels_from_path(catalog: Catalog, params: dict[str, Any], record: RequestRecord) -> None:
    """Model and version from the path, only when the catalog serves them (bounded label values)."""
    name = params.get("name")
    if not isinstance(name, str) or name not in catalog.models:
        return
    record.model = name
    raw = params.get("version")
    version = None if raw is None else decimal(str(raw))
    if version is not None and version in catalog.models[name].versions:
        record.version = str(version)
