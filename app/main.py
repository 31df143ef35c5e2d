"""The ASGI application: `app` (what `python -m app` serves; `uvicorn app.main:app` works too).

`create_app()` only assembles middleware, routers and exception handlers, without reading settings;
start-up and shutdown live in `app/lifecycle.py`.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.api.dispatch import ForecastDispatch
from app.api.errors import register_exception_handlers
from app.api.main import build_router
from app.api.middleware import BodySizeLimitMiddleware, RequestMiddleware
from app.api.routes import docs, ui
from app.core.config import Settings
from app.lifecycle import Lifecycle, lifespan
from app.protocols.http import add_body_models
from app.protocols.registry import REGISTRY, Registry


def _operation_id(route: APIRoute) -> str:
    return f"{route.tags[0]}-{route.name}" if route.tags else route.name


def create_app(settings: Settings | None = None, protocols: Registry = REGISTRY) -> FastAPI:
    """The application; `settings` None means read them from the environment at startup. `protocols`:
    the protocols it speaks (app/protocols/registry.py)."""
    app = FastAPI(
        title="RSA forecasting service",
        summary="Forecasts and attention inspection for RSA (Encoding Recurrence into Transformers) models.",
        version="0.1.0",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        # Self-hosted docs (app/api/routes/docs.py): FastAPI's own load their assets from a CDN.
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        # The service is observed through its Prometheus metrics (/metrics) and logs; FastAPI's native
        # OpenTelemetry would look up the global providers on every request to find none configured.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings_override = settings
    app.state.lifecycle = Lifecycle()
    app.state.protocols = protocols
    register_exception_handlers(app)
    app.add_middleware(ForecastDispatch)  # innermost of ours: after the deadline, admission and size limit
    app.add_middleware(BodySizeLimitMiddleware)
    app.add_middleware(RequestMiddleware)  # added last: outermost, so it sees every answer (413 too)
    app.include_router(build_router(protocols))
    app.mount(docs.STATIC, docs.static_assets(), name="docs-static")
    app.mount(ui.STATIC, ui.static_assets(), name="ui-static")
    _document_bodies(app, protocols)
    return app


def _document_bodies(app: FastAPI, protocols: Registry) -> None:
    """The OpenAPI document with the request bodies the routes parse themselves (app/protocols/http.py), and
    API keys as optional: the bearer scheme applies only when keys are configured, which OpenAPI says
    with an empty requirement beside it."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = add_body_models(generate(), protocols.bodies)
            for operations in schema["paths"].values():
                for operation in operations.values():
                    if operation.get("security") and {} not in operation["security"]:
                        operation["security"] = [{}, *operation["security"]]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the schema


app = create_app()
