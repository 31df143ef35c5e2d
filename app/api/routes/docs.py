"""The API's documentation, self-hosted: the OpenAPI document and Swagger UI with its assets served
from the swagger-ui-bundle package, so the page works on an air-gapped host (FastAPI's own /docs loads
its JavaScript from a CDN)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

STATIC = "/docs/static"

router = APIRouter(include_in_schema=False)


@router.get("/openapi.json")
async def openapi(request: Request) -> dict[str, Any]:
    return request.app.openapi()


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title=f"{request.app.title} - API",
        swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
        swagger_css_url=f"{STATIC}/swagger-ui.css",
        swagger_favicon_url=f"{STATIC}/favicon-32x32.png",
    )


def static_assets() -> StaticFiles:
    """Swagger UI's JavaScript, CSS and icons, from the installed package."""
    return StaticFiles(directory=str(swagger_ui_path))
