"""The ASGI application: `uvicorn app.main:app`.

`create_app()` builds the app without reading settings; the lifespan reads them (or uses the ones
passed in), discovers the model repository, loads and warms up every version in the background
(/healthz answers at once, /readyz turns 200 when all are ready), and on shutdown drains the batchers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.api.errors import register_exception_handlers
from app.api.main import api_router
from app.api.middleware import BodySizeLimitMiddleware, RequestMiddleware
from app.core.config import Settings, get_settings
from app.core.logging import configure_logging
from app.inference.registry import ModelRegistry
from app.inference.service import InferenceService
from app.observability.metrics import Metrics
from app.protocols.rsa_v1.handlers import V1Handlers

logger = logging.getLogger(__name__)


async def _load_models(registry: ModelRegistry) -> None:
    try:
        await registry.load_all()
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("loading the models failed")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings_override or get_settings()
    configure_logging(settings.log_level)
    model_endpoints = tuple(p for p in app.openapi()["paths"] if p.endswith(("/forecast", "/attention")))
    metrics = Metrics(settings.max_batch_rows, model_endpoints)
    registry = ModelRegistry(settings, batcher_hooks=metrics.batcher_hooks)
    registry.discover()
    metrics.watch(registry)
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.registry = registry
    service = InferenceService(registry, settings)
    app.state.service = service
    app.state.v1 = V1Handlers(service)
    logger.info(
        "serving from %s: %s",
        settings.model_repository,
        ", ".join(f"{s.name} {sorted(s.versions)}" for s in registry.models.values()) or "nothing",
    )
    loader = asyncio.create_task(_load_models(registry), name="load-models")
    try:
        yield
    finally:
        loader.cancel()
        await asyncio.gather(loader, return_exceptions=True)
        await registry.stop()
        logger.info("stopped")


def _operation_id(route: APIRoute) -> str:
    return f"{route.tags[0]}-{route.name}" if route.tags else route.name


def create_app(settings: Settings | None = None) -> FastAPI:
    """The application; `settings` None means read them from the environment at startup."""
    app = FastAPI(
        title="RSA forecasting service",
        summary="Forecasts and attention inspection for RSA (Encoding Recurrence into Transformers) models.",
        version="0.1.0",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
    )
    app.state.settings_override = settings
    register_exception_handlers(app)
    app.add_middleware(BodySizeLimitMiddleware)
    app.add_middleware(RequestMiddleware)  # added last: outermost, so it sees every answer (413 too)
    app.include_router(api_router)
    return app


app = create_app()
