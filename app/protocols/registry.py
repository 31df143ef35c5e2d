"""The protocols the service speaks: one line each in `PROTOCOLS`. A new protocol is a package of its own
(schemas, codec, errors, handlers, routes, and a `protocol.py` with its `ProtocolSpec`) plus its line
here; the app (`create_app`), the error handlers, the request metrics, the middleware's admission and the
lifespan read everything else from the `Registry`.

Paths no protocol owns (the service's own: /healthz, /readyz, /metrics, /docs, /ui, and unknown ones)
answer errors in `service_errors`' shape (the `/v1` API's, the service's first) and carry the empty
protocol label; `tests/app/api/test_registry.py` checks that every route of the app is owned by a
protocol or is one of `SERVICE_PATHS`, so a route under a prefix nobody registered cannot slip in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from app.inference.service import InferenceService
from app.protocols.oip_v2.protocol import OIP_V2
from app.protocols.rsa_v1.protocol import RSA_V1
from app.protocols.spec import ErrorRenderer, ProtocolSpec
from app.protocols.timeseries.protocol import KSERVE_TIMESERIES

# The service's own paths (each with what is under it): no protocol's, the empty metrics label.
SERVICE_PATHS = ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/ui")


@dataclass(frozen=True)
class Admitted:
    """The routes admitted before their body is read (app/api/middleware.py): model calls whose model
    (and version) is in the path."""

    routes: frozenset[str]  # route templates
    suffixes: tuple[str, ...]  # their last segments: what a path must end with, checked before routing


class Registry:
    """Protocols by name and path prefix; the longest prefix that owns a path wins (`/v1/timeseries`
    over `/v1`)."""

    def __init__(self, protocols: Iterable[ProtocolSpec], service_errors: ErrorRenderer) -> None:
        self.protocols = tuple(protocols)
        self.service_errors = service_errors
        names = [p.name for p in self.protocols]
        prefixes = [p.prefix for p in self.protocols]
        if len(set(names)) != len(names) or len(set(prefixes)) != len(prefixes):
            raise ValueError(f"protocols need distinct names and prefixes: {names}, {prefixes}")
        self._by_prefix = sorted(self.protocols, key=lambda p: len(p.prefix), reverse=True)
        self._other_labels = sorted(
            ((prefix, label) for p in self.protocols for prefix, label in p.other_labels.items()),
            key=lambda item: len(item[0]),
            reverse=True,
        )
        self.probes = frozenset(path for p in self.protocols for path in p.probes)
        routes = frozenset(route for p in self.protocols for route in p.admitted)
        self.admitted = Admitted(routes, tuple(sorted({"/" + r.rsplit("/", 1)[1] for r in routes})))

    def protocol_for(self, path: str) -> ProtocolSpec | None:
        """The protocol that owns `path`, None for the service's own paths and unknown ones."""
        for protocol in self._by_prefix:
            if protocol.owns(path):
                return protocol
        return None

    def errors_for(self, path: str) -> ErrorRenderer:
        protocol = self.protocol_for(path)
        return self.service_errors if protocol is None else protocol.errors

    def protocol_of(self, endpoint: str) -> str:
        """The `protocol` label of an endpoint label (a route template, a gRPC method path, `unmatched`)."""
        for prefix, label in self._other_labels:
            if endpoint.startswith(prefix):
                return label
        protocol = self.protocol_for(endpoint)
        return "" if protocol is None else protocol.name

    def build_handlers(self, service: InferenceService, draining: Callable[[], bool]) -> dict[type, object]:
        """Each protocol's handlers, by their class (`Runtime.handlers_of`)."""
        built = [protocol.handlers(service, draining) for protocol in self.protocols]
        by_type = {type(handlers): handlers for handlers in built}
        if len(by_type) != len(built):
            raise ValueError("two protocols built handlers of the same class")
        return by_type

    @property
    def bodies(self) -> list[type[BaseModel]]:
        return [body for p in self.protocols for body in p.bodies]

    @property
    def parsers(self) -> tuple[Callable[..., Any], ...]:
        return tuple(parser for p in self.protocols for parser in p.parsers)


PROTOCOLS = (RSA_V1, OIP_V2, KSERVE_TIMESERIES)
REGISTRY = Registry(PROTOCOLS, service_errors=RSA_V1.errors)
protocol_of = REGISTRY.protocol_of
