"""Model metadata: versions, manifest fields, load state and the execution provider in use."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ModelName, V1HandlersDep
from app.api.routes.responses import ERRORS
from app.protocols.rsa_v1.schemas import ModelInfo, ModelList

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.get("", response_model=ModelList)
async def list_models(v1: V1HandlersDep) -> ModelList:
    return await v1.models()


@router.get("/{name}", response_model=ModelInfo, responses=ERRORS)
async def get_model(name: ModelName, v1: V1HandlersDep) -> ModelInfo:
    return await v1.model(name)
