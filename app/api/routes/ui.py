"""The forecast and recurrence inspector: one static page (app/ui/) that calls the `/v1` API from the
browser. Its JavaScript, CSS and the vendored uPlot are served from the package under /ui/static, so the
page works on an air-gapped host; nothing is built or fetched at run time.

The page and its assets are open even when API keys are configured, like /healthz: they hold no data and
no model detail, and a browser cannot send an `Authorization` header when it navigates to a page, so a
page behind the keys could never be opened. Every data call the page makes (`/v1/models`, forecast,
attention) goes through the API and its key check; the key typed into the page's field is kept in the
page's memory only and sent as `Authorization: Bearer`.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles

UI_DIR = Path(__file__).resolve().parents[2] / "ui"
STATIC = "/ui/static"

# The page may load only what this service serves and call only this service: no CDN, no other host
# (the browser enforces it; tests/app/ui checks that no request leaves the loopback). uPlot sets styles
# through the CSSOM, which `style-src 'self'` allows.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidated, so a new release's page never runs old scripts
}

router = APIRouter(include_in_schema=False)


def _page() -> Response:
    # Read per request (a few kB): an edited page shows on reload, with no state kept in the module.
    return Response((UI_DIR / "index.html").read_bytes(), media_type="text/html", headers=HEADERS)


@router.get("/ui")
async def inspector() -> Response:
    """The page, with no model chosen yet (it offers those `GET /v1/models` lists)."""
    return _page()


@router.get("/ui/{model}")
async def inspector_for(model: str) -> Response:
    """The same page; it reads the model's name from its address and selects it."""
    return _page()


def static_assets() -> StaticFiles:
    """The page's script, style, bundled example and vendored uPlot (app/ui/)."""
    return StaticFiles(directory=str(UI_DIR))
