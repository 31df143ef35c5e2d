"""What a protocol declares of itself: a `ProtocolSpec`, exported by its package (`protocol.py`) and
listed once in the registry (app/protocols/registry.py), which everything else iterates: the routers
(app/api/main.py), the error shape per path (app/api/errors.py), the metrics' protocol label, the
handlers in the runtime (app/lifecycle.py), the OpenAPI bodies (app/main.py), the parse process's lanes
and the routes admitted before their body is read (app/api/middleware.py).
"""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.responses import Response

from app.core.errors import ServiceError
from app.inference.service import InferenceService
from app.runtime import Runtime


@dataclass(frozen=True)
class ErrorRenderer:
    """How a protocol answers an error, in its own shape."""

    # A domain error, for code that answers outside the routes (middleware: size limit, admission).
    response_for: Callable[[ServiceError], Response]
    # A domain, validation or routing (HTTP) error raised in a route; re-raises anything else.
    render: Callable[[Request, Exception], Awaitable[Response]]
    # Anything else: a 500, logged.
    unexpected: Callable[[Request, Exception], Awaitable[Response]]


# Builds a protocol's handlers (what its routes call) from the inference service and "is the service
# draining?"; the runtime keeps them by type (`Runtime.handlers_of`).
HandlersFactory = Callable[[InferenceService, Callable[[], bool]], object]


class Server(typing.Protocol):
    """A server of its own beside HTTP (OIP v2's gRPC): started with the service; `stop` refuses new
    calls and lets those in flight finish, with HTTP's own wait."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


# The server a protocol runs for this runtime, or None when the settings ask for none.
ServerFactory = Callable[[Runtime], Server | None]


@dataclass(frozen=True)
class ProtocolSpec:
    """One protocol of the service, as the registry wires it."""

    name: str  # its name everywhere, and the `protocol` label of its request metrics
    prefix: str  # every path equal to it or under it ("/v2" takes "/v2" and "/v2/...") is this protocol's
    errors: ErrorRenderer
    handlers: HandlersFactory
    routers: tuple[APIRouter, ...] = ()  # behind the API keys, when keys are configured
    open_routers: tuple[APIRouter, ...] = ()  # open, like /healthz (health probes)
    bodies: tuple[type[BaseModel], ...] = ()  # request bodies its routes parse themselves (for OpenAPI)
    admitted: tuple[str, ...] = ()  # route templates admitted before their body is read (by size)
    probes: tuple[str, ...] = ()  # health paths: counted, but kept out of the in-flight gauge and latency
    parsers: tuple[Callable[..., Any], ...] = ()  # parse-process lanes: their modules load as it starts
    servers: tuple[ServerFactory, ...] = ()  # servers besides HTTP, started by the lifespan
    # Endpoint labels outside `prefix` that are this protocol's too, by label prefix -> metrics label
    # (OIP v2's gRPC method paths count as `oip_v2_grpc`).
    other_labels: Mapping[str, str] = field(default_factory=dict)

    def owns(self, path: str) -> bool:
        return path == self.prefix or path.startswith(self.prefix + "/")
