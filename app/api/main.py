"""Every router, included in one place. Liveness, readiness and metrics are open; everything else
needs an API key when keys are configured (a router-level dependency)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from app.api.deps import require_api_key
from app.api.routes import attention, docs, forecast, health, metrics, models
from app.api.routes.responses import AUTH_ERRORS

api_router = APIRouter()
api_router.include_router(health.router)
api_router.include_router(metrics.router)

protected = [Depends(require_api_key)]
for router in (docs.router, models.router, forecast.router, attention.router):
    api_router.include_router(router, dependencies=protected, responses=AUTH_ERRORS)
