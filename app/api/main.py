"""Every router, included in one place. Liveness, readiness, metrics and the inspector page are open;
everything else needs an API key when keys are configured (a router-level dependency)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from app.api.deps import require_api_key
from app.api.routes import attention, docs, forecast, health, metrics, models, oip_v2, timeseries, ui
from app.api.routes.responses import AUTH_ERRORS

api_router = APIRouter()
api_router.include_router(health.router)
api_router.include_router(metrics.router)
api_router.include_router(oip_v2.health)  # OIP v2's liveness and readiness, open like /healthz
# The inspector page holds no data, and a browser cannot send a key when it opens a page: its data
# calls carry the key typed into it (app/api/routes/ui.py).
api_router.include_router(ui.router)

protected = [Depends(require_api_key)]
routers = (docs.router, models.router, forecast.router, attention.router, oip_v2.router, timeseries.router)
for router in routers:
    api_router.include_router(router, dependencies=protected, responses=AUTH_ERRORS)
