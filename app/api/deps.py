"""Dependencies as `Annotated` aliases. Everything comes from `app.state`, set up by the lifespan;
tests can swap any of them with `app.dependency_overrides`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from app.core.errors import ModelNotReady
from app.protocols.rsa_v1.handlers import DataPlane


def get_dataplane(request: Request) -> DataPlane:
    dataplane: DataPlane | None = getattr(request.app.state, "dataplane", None)
    if dataplane is None:
        raise ModelNotReady("the service is starting", retry_after_s=1)
    return dataplane


DataPlaneDep = Annotated[DataPlane, Depends(get_dataplane)]

ModelName = Annotated[str, Path(description="Model name, a folder of the model repository.")]
ModelVersionNumber = Annotated[int, Path(ge=1, description="Model version (positive integer).")]
