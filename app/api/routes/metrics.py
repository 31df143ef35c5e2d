"""Prometheus metrics. Answered on the event loop from in-memory counters and the registry's state:
it never waits behind the forecast queue, whose session calls run in their own threads."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.core.errors import ModelNotReady
from app.observability.metrics import Metrics

router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "content": {"text/plain": {}, "application/openmetrics-text": {}},
            "description": "Prometheus text, or OpenMetrics when the Accept header asks for it.",
        }
    },
)
async def metrics(request: Request) -> Response:
    """The service's metrics in the Prometheus text format (OpenMetrics when the scraper asks for it)."""
    registry: Metrics | None = getattr(request.app.state, "metrics", None)
    if registry is None:
        raise ModelNotReady("the service is starting", retry_after_s=1)
    body, content_type = registry.render(request.headers.get("accept"))
    return Response(body, media_type=content_type)
