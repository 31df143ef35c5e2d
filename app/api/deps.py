"""Dependencies as `Annotated` aliases. Everything comes from `app.state`, set up by the lifespan;
tests can swap any of them with `app.dependency_overrides`. `v1_handlers` and `check_api_key` are the
dependencies' bodies, also called by the forecast dispatch (app/api/dispatch.py), which answers
without FastAPI's dependency solving.

Every dependency is `async def` although none awaits: FastAPI runs a plain `def` dependency in a worker
thread, and those two thread hops were a tenth of the event loop's time per forecast (profiled).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.datastructures import State

from app.core.errors import ModelNotReady
from app.core.security import ApiKeys
from app.protocols.rsa_v1.handlers import V1Handlers


def v1_handlers(state: State) -> V1Handlers:
    handlers: V1Handlers | None = getattr(state, "v1", None)
    if handlers is None:
        raise ModelNotReady("the service is starting", retry_after_s=1)
    return handlers


def check_api_key(state: State, authorization: str | None) -> None:
    """Raise unless the Authorization header carries a valid key (or no key is configured)."""
    api_keys: ApiKeys | None = getattr(state, "api_keys", None)
    if api_keys is None:
        raise ModelNotReady("the service is starting", retry_after_s=1)
    api_keys.check(authorization)


async def get_v1_handlers(request: Request) -> V1Handlers:
    return v1_handlers(request.app.state)


V1HandlersDep = Annotated[V1Handlers, Depends(get_v1_handlers)]

ModelName = Annotated[str, Path(description="Model name, a folder of the model repository.")]
ModelVersionNumber = Annotated[int, Path(ge=1, description="Model version (positive integer).")]


# Documents the scheme in OpenAPI (securitySchemes); auto_error off so that our own check answers, with
# 401 for no key and 403 for a wrong one, in the API's error shape.
bearer = HTTPBearer(auto_error=False, description="An API key, when the service is configured with them.")


async def require_api_key(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> None:
    check_api_key(request.app.state, None if credentials is None else f"Bearer {credentials.credentials}")
