"""ASGI middleware."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.body_limit import RequestBodyLimitResponder
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import PayloadTooLarge, error_response_for


class BodySizeLimitMiddleware:
    """Caps request bodies at `settings.max_body_bytes` with a 413 in the usual error JSON.

    The limit is read per request from `app.state.settings` (set by the lifespan), so building the app
    needs no settings. A declared Content-Length above the limit is refused before the body is read;
    a streamed body is counted by Starlette's responder, whose 413 FastAPI re-raises inside the route
    as an HTTPException that our handler renders.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        settings = getattr(scope["app"].state, "settings", None) if scope["type"] == "http" else None
        if settings is None:
            await self.app(scope, receive, send)
            return
        limit: int = settings.max_body_bytes
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            error = PayloadTooLarge(
                f"request body of {declared} bytes is over the limit of {limit} bytes",
                field="body",
                limit=limit,
            )
            await error_response_for(error)(scope, receive, send)
            return
        await RequestBodyLimitResponder(self.app, limit)(scope, receive, send)
