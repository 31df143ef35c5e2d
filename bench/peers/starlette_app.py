"""What the Starlette peers (minimal, floor) share: one forecast route and GET /readyz, run by uvicorn on
127.0.0.1."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.peers.common import HOST


async def readyz(request: Request) -> Response:
    return Response(b"ok")


def serve(forecast_path: str, forecast: Callable[[Request], Awaitable[Response]], port: int) -> None:
    """`forecast` on POST `forecast_path`, until the process is stopped."""
    app = Starlette(routes=[Route(forecast_path, forecast, methods=["POST"]), Route("/readyz", readyz)])
    uvicorn.run(app, host=HOST, port=port, log_level="warning")
