"""Dependencies as `Annotated` aliases. Everything comes from the app's `Runtime` (app/runtime.py), set up
by the lifespan; tests can swap any of them with `app.dependency_overrides`. `check_api_key` is the
dependencies' body, also called by the forecast dispatch (app/api/dispatch.py), which answers without
FastAPI's dependency solving.

Every dependency is `async def` although none awaits: FastAPI runs a plain `def` dependency in a worker
thread, and those two thread hops were a tenth of the event loop's time per forecast (profiled). A
protocol's handlers are its routes' dependency, `app.protocols.http.handlers`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.runtime import Runtime, runtime_of


def check_api_key(runtime: Runtime, authorization: str | None) -> None:
    """Raise unless the Authorization header carries a valid key (or no key is configured)."""
    runtime.api_keys.check(authorization)


async def get_runtime(request: Request) -> Runtime:
    return runtime_of(request.app)


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]

# Documents the scheme in OpenAPI (securitySchemes); auto_error off so that our own check answers, with
# 401 for no key and 403 for a wrong one, in the API's error shape.
bearer = HTTPBearer(auto_error=False, description="An API key, when the service is configured with them.")


async def require_api_key(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> None:
    # The header as sent, not `credentials` (None for any scheme but Bearer): the check says what a
    # header without `Bearer` lacks, as the forecast dispatch does.
    check_api_key(runtime_of(request.app), request.headers.get("authorization"))
