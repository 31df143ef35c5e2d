"""Prometheus metrics: this front end's request metrics (every front end's, with RSA_WORKERS > 1), the
engine's, and the memory of every process of the service. Answered on the event loop from in-memory
counters and the engine's state: it never waits behind the forecast queue, whose session calls run in
their own threads (or process), and never more than a second for an engine process that does not answer."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.observability.metrics import render, service_memory
from app.runtime import runtime_of

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
    runtime = runtime_of(request.app)
    families = [
        *runtime.metrics.families(),
        *await runtime.engine.metric_families(),  # bounded: a stuck engine's are left out (client.py)
        *service_memory(runtime.settings.supervisor_pid),
    ]
    body, content_type = render(families, request.headers.get("accept"))
    return Response(body, media_type=content_type)
