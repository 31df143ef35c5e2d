"""Every router, included in one place."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.routes import attention, forecast, health, metrics, models

api_router = APIRouter()
api_router.include_router(health.router)
api_router.include_router(metrics.router)
api_router.include_router(models.router)
api_router.include_router(forecast.router)
api_router.include_router(attention.router)
