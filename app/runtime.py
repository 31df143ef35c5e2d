"""The running service's parts, built once by the lifespan (app/lifecycle.py) and read by every route,
middleware and server through one typed object: `runtime_of(app)`. Before the lifespan has run (and
after it ended) there is none, and the service answers 503 `model_not_ready` ("starting").

The front end's parts are the protocols' handlers (one object per protocol, built from the registry's
specs in app/protocols/registry.py, found by class: `handlers_of(V1Handlers)`), the request metrics, the
API keys and the parse process; everything about models goes through `engine` (app/engine/api.py) and
its catalog, whether the engine runs in this process or in an engine process of its own (RSA_WORKERS >
1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from app.core.config import Settings
from app.core.errors import ModelNotReady
from app.core.offload import ParseProcess
from app.core.security import ApiKeys
from app.engine.api import Engine
from app.inference.service import InferenceService
from app.observability.metrics import RequestMetrics

H = TypeVar("H")


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    service: InferenceService
    metrics: RequestMetrics
    api_keys: ApiKeys
    parse_process: ParseProcess
    handlers: dict[type, object]  # each protocol's handlers, by their class

    def handlers_of(self, kind: type[H]) -> H:
        """The handlers of that class (a protocol's); KeyError when no protocol registered them."""
        found = self.handlers[kind]
        assert isinstance(found, kind)
        return found


def runtime_of(app: Any) -> Runtime:
    """The app's runtime, or 503 while the service starts (or after it stopped)."""
    runtime: Runtime | None = getattr(app.state, "runtime", None)
    if runtime is None:
        raise ModelNotReady("the service is starting", retry_after_s=1)
    return runtime


def maybe_runtime(app: Any) -> Runtime | None:
    """The app's runtime, None before start-up (middleware that must pass requests through then)."""
    return getattr(app.state, "runtime", None)
