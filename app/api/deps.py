"""Dependencies as `Annotated` aliases. Everything comes from `app.state`, set up by the lifespan;
tests can swap any of them with `app.dependency_overrides`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from app.core.config import Settings
from app.dataplane import DataPlane
from app.errors import ModelNotReady
from app.registry import ModelRegistry


def get_registry(request: Request) -> ModelRegistry:
    registry: ModelRegistry | None = getattr(request.app.state, "registry", None)
    if registry is None:
        raise ModelNotReady("the service is starting", retry_after_s=1)
    return registry


def get_dataplane(request: Request) -> DataPlane:
    dataplane: DataPlane | None = getattr(request.app.state, "dataplane", None)
    if dataplane is None:
        raise ModelNotReady("the service is starting", retry_after_s=1)
    return dataplane


def get_app_settings(request: Request) -> Settings:
    settings: Settings | None = getattr(request.app.state, "settings", None)
    if settings is None:
        raise ModelNotReady("the service is starting", retry_after_s=1)
    return settings


RegistryDep = Annotated[ModelRegistry, Depends(get_registry)]
DataPlaneDep = Annotated[DataPlane, Depends(get_dataplane)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]

ModelName = Annotated[str, Path(description="Model name, a folder of the model repository.")]
ModelVersionNumber = Annotated[int, Path(ge=1, description="Model version (positive integer).")]
