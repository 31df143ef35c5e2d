"""What the protocols' routes share: their handlers as a dependency (`handlers`), and request bodies read
and validated by the routes themselves, with the API's usual errors.

The body is read as bytes after a Content-Type check (415) and handed to a parser: a pydantic model's
own JSON validation in one pass (no json.loads first), or a protocol's fast lane that falls back to its
model (`app.protocols.rsa_v1.wire`). Validation errors come out exactly as FastAPI's would (a
RequestValidationError with locations under "body"), so the error rendering and the OpenAPI document
(`body_schema`) are unchanged.

Parsing runs on the event loop, except for large bodies of a route with an `offload`: those go to the
parse process (`app.core.offload`), since a thread would not free the loop (neither pydantic-core nor
orjson releases the GIL: 250 ms gaps in the loop's thread measured with pydantic on 10 MB). Every `/v1`
route with a body has one: the forecast's fast lane then its model, the others their model
(`app.protocols.parsing.validate_json`). A refusal there comes back as its errors (`Refusal`), rendered
here as any other body's; only what a lane declines (None) is parsed here, so its errors are the model's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from app.core.connections import BODY_TIMED_OUT
from app.core.errors import BodyTimeout, ClientClosed, UnsupportedMediaType
from app.core.offload import ParseProcess
from app.protocols.parsing import Refusal
from app.runtime import maybe_runtime, runtime_of

T = TypeVar("T")
H = TypeVar("H")


def handlers(kind: type[H]) -> Any:
    """The dependency on a protocol's handlers, from the runtime (`Annotated[V1Handlers,
    handlers(V1Handlers)]`); `app.dependency_overrides[handlers_getter(V1Handlers)]` swaps them."""
    return Depends(handlers_getter(kind))


_GETTERS: dict[type, Callable[[Request], Awaitable[Any]]] = {}


def handlers_getter(kind: type[H]) -> Callable[[Request], Awaitable[H]]:
    """The one dependency function for `kind`'s handlers (the same each time, for overrides)."""

    # `async def`: FastAPI runs a plain `def` dependency in a worker thread, and those hops were a tenth
    # of the event loop's time per forecast (profiled).
    async def get(request: Request) -> H:
        return runtime_of(request.app).handlers_of(kind)

    return _GETTERS.setdefault(kind, get)


async def read_body(request: Request) -> bytes:
    """The request's body. A connection that closes before all of it came is no server fault (it was a
    500 with a traceback): BodyTimeout where the connection answered 408 for a body slower than
    RSA_BODY_MIN_BYTES_S, else ClientClosed (499); no one reads either answer, the metrics count it."""
    try:
        return await request.body()
    except ClientDisconnect:
        if request.scope.get(BODY_TIMED_OUT):
            raise BodyTimeout("the body came too slowly: answered 408 and closed") from None
        raise ClientClosed("the client closed the connection before its body had come") from None


async def parse_body(
    request: Request,
    parse: Callable[[bytes], T],
    offload: Callable[[bytes], T | Refusal | None] | None = None,
) -> T:
    """The body through `parse` (e.g. `Model.model_validate_json`), which may raise ValidationError.

    `offload`: a parser that may run in the parse process for large bodies (it must pickle, as a
    module-level function or a partial of one): its request, or its `Refusal` (the body's 422), is final;
    None from it means "not mine", and `parse` decides."""
    media_type = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise UnsupportedMediaType(
            f"the body must be JSON (Content-Type: application/json), got {media_type!r}",
            field="header Content-Type",
            limit="application/json",
        )
    raw = await read_body(request)
    if not raw:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required"}])
    runtime = maybe_runtime(request.app)
    worker: ParseProcess | None = runtime.parse_process if runtime is not None else None
    try:
        if offload is not None and worker is not None and worker.takes(len(raw)):
            parsed: T | Refusal | None = await worker.run(offload, raw)
            if isinstance(parsed, Refusal):
                raise RequestValidationError(_in_body(parsed.errors), body=None)
            if parsed is not None:
                return parsed
        return parse(raw)
    except ValidationError as exc:
        raise RequestValidationError(_in_body(exc.errors(include_url=False)), body=None) from None


def _in_body(errors: Any) -> list[dict[str, Any]]:
    """pydantic's errors located under "body", as FastAPI locates its own."""
    return [{**e, "loc": ("body", *e["loc"])} for e in errors]


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` for a route that parses `model` itself: the request body as FastAPI would
    document it (the model's schema is added to the components by `add_body_models`)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


def add_body_models(openapi: dict[str, Any], models: list[type[BaseModel]]) -> dict[str, Any]:
    """Add the body models (and the models they use) to the OpenAPI components."""
    schemas = openapi.setdefault("components", {}).setdefault("schemas", {})
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode="validation")
        for name, definition in schema.pop("$defs", {}).items():
            schemas.setdefault(name, definition)
        schemas[model.__name__] = schema
    return openapi
