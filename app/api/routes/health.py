"""Liveness and readiness, kept separate: alive while the process runs; ready once every model is."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.protocols.rsa_v1.schemas import Liveness, ModelReadiness, Readiness
from app.runtime import maybe_runtime

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Liveness)
async def healthz() -> Liveness:
    """Always 200 while the process runs."""
    return Liveness()


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(request: Request, response: Response) -> Readiness:
    """200 when every configured model version is loaded and warmed up, 503 otherwise, and 503 from the
    moment a shutdown begins (`draining`), so load balancers stop sending before the server stops."""
    runtime = maybe_runtime(request.app)
    if runtime is None:
        response.status_code = 503
        return Readiness(ready=False, models=[])
    catalog = runtime.engine.catalog
    models = [
        ModelReadiness(name=served.name, ready=served.ready, errors=served.errors())
        for served in catalog.models.values()
    ]
    if catalog.error:
        models.append(ModelReadiness(name="<repository>", ready=False, errors=[catalog.error]))
    draining = request.app.state.lifecycle.draining
    ready = catalog.ready and not draining
    if not ready:
        response.status_code = 503
    return Readiness(ready=ready, draining=draining, models=models)
