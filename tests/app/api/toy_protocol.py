"""A protocol as small as one can be, for tests/app/api/test_registry.py: what a new protocol writes in
its own package (handlers, routes, an error shape, its spec). Nothing else of the service names it."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.context import note_error
from app.core.errors import ServiceError
from app.inference.service import InferenceService
from app.protocols.http import body_schema, handlers, parse_body
from app.protocols.spec import ErrorRenderer, ProtocolSpec
from app.protocols.status import HTTP_STATUS, error_headers, lookup

logger = logging.getLogger(__name__)


class ToyHandlers:
    def __init__(self, service: InferenceService) -> None:
        self.service = service
        self.unexpected = False  # a test sets it: the next call fails with a bug

    def predict(self, name: str, scale: float) -> dict[str, object]:
        if self.unexpected:
            raise KeyError("a bug")
        entry = self.service.resolve(name, None)  # ModelNotFound, ModelNotReady as every protocol
        return {"model": entry.name, "version": entry.version, "scale": scale}


class ToyRequest(BaseModel):
    scale: float


# -- errors: {"toy_error": code, "why": message} ----------------------------------------------------------


def _answer(status: int, code: str, why: str, headers: dict[str, str] | None = None) -> JSONResponse:
    note_error(code)
    return JSONResponse({"toy_error": code, "why": why}, status_code=status, headers=headers)


def response_for(exc: ServiceError) -> JSONResponse:
    return _answer(lookup(HTTP_STATUS, exc, 500), exc.code, exc.message, error_headers(exc))


async def render(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, ServiceError):
        return response_for(exc)
    if isinstance(exc, RequestValidationError):
        return _answer(400, "invalid_input", str(exc.errors()[0]["msg"]))
    if isinstance(exc, StarletteHTTPException):
        return _answer(exc.status_code, "http_error", str(exc.detail))
    raise exc


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("toy: unhandled error", exc_info=exc)
    return _answer(500, "internal_error", "internal server error")


# -- routes -------------------------------------------------------------------------------------------

Handlers = Annotated[ToyHandlers, handlers(ToyHandlers)]
router = APIRouter(prefix="/toy", tags=["toy"])
PREDICT = "/toy/models/{name}/predict"


@router.post("/models/{name}/predict", openapi_extra=body_schema(ToyRequest))
async def predict(name: str, request: Request, toy: Handlers) -> dict[str, object]:
    body = await parse_body(request, ToyRequest.model_validate_json)
    return toy.predict(name, body.scale)


@router.get("/models/{name}")
async def describe(name: str, toy: Handlers) -> dict[str, object]:
    return toy.predict(name, 1.0)


@router.get("/health")
async def health() -> dict[str, bool]:
    return {"ok": True}


# -- the spec: what the registry wires ------------------------------------------------------------------

TOY = ProtocolSpec(
    name="toy",
    prefix="/toy",
    errors=ErrorRenderer(response_for, render, unexpected),
    handlers=lambda service, draining: ToyHandlers(service),
    routers=(router,),
    bodies=(ToyRequest,),
    admitted=(PREDICT,),
    probes=("/toy/health",),
)
