"""Every router, included in one place. Liveness, readiness and metrics are open; everything else
needs an API key when keys are configured (a router-level dependency)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from app.api.deps import require_api_key
from app.api.routes import attention, docs, forecast, health, metrics, models

api_router = APIRouter()
api_router.include_router(health.router)
api_router.include_router(metrics.router)

protected = [Depends(require_api_key)]
api_router.include_router(docs.router, dependencies=protected)
api_router.include_router(models.router, dependencies=protected)
api_router.include_router(forecast.router, dependencies=protected)
api_router.include_router(attention.router, dependencies=protected)
