"""The forecast routes' hot path: `POST /v1/models/{name}[/versions/{version}]/forecast` answered from
ASGI directly, by the routes' own endpoint functions, without FastAPI's routing and dependency solving.

Why: those layers (matching through the included routers, solving the dependencies, FastAPI's inner
middleware, `request_response`) cost about 0.2-0.3 ms of CPU per forecast on this machine, about a
fifth of a one-series request's whole cost (measured side by side: 507 -> 598 req/s at concurrency 1,
670 -> 768 at 16). What the hot path keeps, in the same order: the API key check, then the `/v1`
handlers (from the runtime, as the routes' dependency takes them), then the endpoint function
(`app.protocols.rsa_v1.routes`); a domain, validation or HTTP error gets exactly the response the app's
exception handlers give (`render_error`), and anything else goes to the server error middleware (500).
It sits inside the request middleware (deadline, admission, metrics, drain) and the body size limit.

What it leaves to FastAPI: everything else, and every forecast path it does not take as valid (a
version that is not a positive integer gets FastAPI's own 422), so the routes stay declared there: the
OpenAPI document, path validation, 405 for other methods.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.deps import check_api_key
from app.protocols.rsa_v1.errors import render_error
from app.protocols.rsa_v1.handlers import V1Handlers
from app.protocols.rsa_v1.routes import forecast, forecast_version
from app.runtime import runtime_of

# The two routes as Starlette matches them (`name` any one segment), with a version in its plain form only.
_FORECAST_PATH = re.compile(r"/v1/models/(?P<name>[^/]+)(?:/versions/(?P<version>[1-9][0-9]*))?/forecast")


@dataclass(frozen=True)
class MatchedRoute:
    """What the request middleware reads of a matched route (`scope["route"]`): its path template."""

    path: str


LATEST = MatchedRoute("/v1/models/{name}/forecast")
VERSIONED = MatchedRoute("/v1/models/{name}/versions/{version}/forecast")


def forecast_route(path: str) -> tuple[MatchedRoute, dict[str, str]] | None:
    """The forecast route this path takes, and its path parameters (as Starlette gives them); None for
    any other path."""
    match = _FORECAST_PATH.fullmatch(path)
    if match is None:
        return None
    if match["version"] is None:
        return LATEST, {"name": match["name"]}
    return VERSIONED, {"name": match["name"], "version": match["version"]}


class ForecastDispatch:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = None
        if scope["type"] == "http" and scope["method"] == "POST":
            matched = forecast_route(scope["path"])
        if matched is None:
            await self.app(scope, receive, send)
            return
        scope["route"], params = matched
        scope["path_params"] = params
        name, version = params["name"], params.get("version")
        request = Request(scope, receive)
        response: Response
        try:
            runtime = runtime_of(request.app)
            check_api_key(runtime, request.headers.get("authorization"))
            v1 = runtime.handlers_of(V1Handlers)
            if version is None:
                response = await forecast(name, request, v1)
            else:
                response = await forecast_version(name, int(version), request, v1)
        except Exception as exc:
            response = await render_error(request, exc)
        await response(scope, receive, send)
