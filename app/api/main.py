"""Every router, included in one place: the service's own, then each registered protocol's
(app/protocols/registry.py). Liveness, readiness, metrics, the inspector page and the protocols' open
routers (OIP v2's health) are open; everything else needs an API key when keys are configured (a
router-level dependency)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from app.api.deps import require_api_key
from app.api.routes import docs, health, metrics, ui
from app.api.routes.responses import AUTH_ERRORS
from app.protocols.registry import Registry


def build_router(registry: Registry) -> APIRouter:
    api_router = APIRouter()
    api_router.include_router(health.router)
    api_router.include_router(metrics.router)
    for protocol in registry.protocols:
        for router in protocol.open_routers:
            api_router.include_router(router)
    # The inspector page holds no data, and a browser cannot send a key when it opens a page: its data
    # calls carry the key typed into it (app/api/routes/ui.py).
    api_router.include_router(ui.router)

    protected = [Depends(require_api_key)]
    routers = [docs.router, *(router for protocol in registry.protocols for router in protocol.routers)]
    for router in routers:
        api_router.include_router(router, dependencies=protected, responses=AUTH_ERRORS)
    return api_router
