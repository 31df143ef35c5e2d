"""Open Inference Protocol v2 over REST (KServe's and Triton's `/v2`), with Triton's binary tensor data
extension and gzip/deflate request bodies; the operations are `app.protocols.oip_v2.handlers`'.

`health` (live, ready) is open like /healthz and /readyz; `router` needs an API key when keys are set.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from app.core.numbers import decimal
from app.core.offload import ParseProcess
from app.protocols.http import body_schema, handlers, parse_body, read_body
from app.protocols.oip_v2.codec import (
    HEADER_LENGTH,
    JSON_CHUNK,
    Tensor,
    binary_outputs,
    encode_pieces,
    encode_response,
    json_numbers,
    parse_infer,
)
from app.protocols.oip_v2.handlers import OipV2Handlers, parse_version
from app.protocols.oip_v2.schemas import (
    InferenceErrorResponse,
    InferenceRequest,
    InferenceResponse,
    ModelMetadata,
    ModelReady,
    RepositoryIndexRequest,
    RepositoryModel,
    RepositoryRequest,
    ServerLive,
    ServerMetadata,
    ServerReady,
)
from app.runtime import maybe_runtime

ERRORS: dict[int | str, dict[str, object]] = {
    400: {
        "model": InferenceErrorResponse,
        "description": "Invalid request: the message names the tensor and the rule.",
    },
    404: {"model": InferenceErrorResponse, "description": "Unknown model or version."},
    503: {
        "model": InferenceErrorResponse,
        "description": "Model loading or failed, or overloaded (Retry-After).",
    },
}


Handlers = Annotated[OipV2Handlers, handlers(OipV2Handlers)]
BodyT = TypeVar("BodyT", RepositoryIndexRequest, RepositoryRequest)
OCTET = "application/octet-stream"  # an answer with binary tensors after its JSON part

health = APIRouter(prefix="/v2/health", tags=["oip-v2"])
router = APIRouter(prefix="/v2", tags=["oip-v2"])
# Admitted before their body is read (app/api/middleware.py), by the body's size.
INFER_ROUTES = ("/v2/models/{name}/infer", "/v2/models/{name}/versions/{version}/infer")


@health.get("/live", response_model=ServerLive)
async def server_live() -> ServerLive:
    """200 while the process runs."""
    return ServerLive(live=True)


@health.get("/ready", response_model=ServerReady, responses={503: {"model": ServerReady}})
async def server_ready(response: Response, v2: Handlers) -> ServerReady:
    """200 when every configured model version is ready; 503 while loading, failed, or draining."""
    ready = v2.server_ready()
    if not ready:
        response.status_code = 503
    return ServerReady(ready=ready)


@router.get("", response_model=ServerMetadata)
async def server_metadata(v2: Handlers) -> ServerMetadata:
    """Server name, version and extensions (`binary_tensor_data`)."""
    return v2.server_metadata()


@router.get("/models/{name}", response_model=ModelMetadata, responses=ERRORS)
async def model_metadata(name: str, v2: Handlers) -> ModelMetadata:
    """Inputs, outputs (-1 for the batch axis), versions and platform of the latest version."""
    return v2.model_metadata(name, None)


@router.get("/models/{name}/versions/{version}", response_model=ModelMetadata, responses=ERRORS)
async def model_version_metadata(name: str, version: str, v2: Handlers) -> ModelMetadata:
    return v2.model_metadata(name, parse_version(version))


def _ready(name: str, ready: bool, response: Response) -> ModelReady:
    if not ready:
        response.status_code = 503
    return ModelReady(name=name, ready=ready)


@router.get("/models/{name}/ready", response_model=ModelReady, responses=ERRORS)
async def model_ready(name: str, response: Response, v2: Handlers) -> ModelReady:
    """200 when a version of the model is loaded, 503 otherwise."""
    return _ready(name, v2.model_ready(name, None), response)


@router.get("/models/{name}/versions/{version}/ready", response_model=ModelReady, responses=ERRORS)
async def model_version_ready(name: str, version: str, response: Response, v2: Handlers) -> ModelReady:
    return _ready(name, v2.model_ready(name, parse_version(version)), response)


async def _parse(request: Request, limit: int) -> tuple[InferenceRequest, list[Tensor]]:
    """The body's request and tensors; a body whose JSON part is large is parsed in the parse process,
    as /v1's are, so that the event loop keeps serving meanwhile (1024 windows of 512 x 7 as JSON: about
    a second of parsing). Binary tensors cost next to nothing to decode: only their JSON header counts."""
    raw = await read_body(request)
    encoding, header = request.headers.get("content-encoding"), request.headers.get(HEADER_LENGTH)
    # compressed: the JSON part's size is unknown before inflating, so the whole body counts
    json_size = decimal(header.strip()) if header is not None and encoding is None else None
    runtime = maybe_runtime(request.app)
    worker: ParseProcess | None = runtime.parse_process if runtime is not None else None
    if worker is not None and worker.takes(len(raw) if json_size is None else json_size):
        parsed = await worker.run(parse_infer, raw, encoding, header, limit)
        if parsed is not None:  # None: the worker is gone, the loop parses
            return parsed
    return parse_infer(raw, encoding, header, limit)


async def _infer(name: str, version: int | None, request: Request, v2: OipV2Handlers) -> Response:
    infer_request, inputs = await _parse(request, v2.settings.max_body_bytes)
    outputs = [o.name for o in infer_request.outputs] if infer_request.outputs else None
    result = await v2.infer(name, version, inputs, outputs, infer_request.id)
    binary = binary_outputs(infer_request, list(result.outputs))
    if json_numbers(result, binary) <= JSON_CHUNK:
        content, header_length = encode_response(result, binary)
        if header_length is None:
            return Response(content, media_type="application/json")
        return Response(content, media_type=OCTET, headers={HEADER_LENGTH: str(header_length)})
    # A big JSON answer: encoded in a worker thread and sent piece by piece, never held as one buffer on
    # the event loop (bench.big_bodies: 48 MB of JSON for 720 windows).
    pieces, header_length = await asyncio.to_thread(encode_pieces, result, binary)
    headers = {"content-length": str(sum(len(p) for p in pieces))}
    if header_length is not None:
        headers[HEADER_LENGTH] = str(header_length)
    media_type = "application/json" if header_length is None else OCTET
    return StreamingResponse(_each(pieces), media_type=media_type, headers=headers)


async def _each(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


@router.post(
    "/models/{name}/infer",
    response_model=InferenceResponse,
    responses=ERRORS,
    openapi_extra=body_schema(InferenceRequest),
)
async def infer(name: str, request: Request, v2: Handlers) -> Response:
    """Forecast: `window` FP32 [n, L, C] (and `phase` or `start` INT64 [n] for a cycle model) ->
    `forecast` FP32 [n, H, C]; JSON or binary tensors (Inference-Header-Content-Length)."""
    return await _infer(name, None, request, v2)


@router.post(
    "/models/{name}/versions/{version}/infer",
    response_model=InferenceResponse,
    responses=ERRORS,
    openapi_extra=body_schema(InferenceRequest),
)
async def infer_version(name: str, version: str, request: Request, v2: Handlers) -> Response:
    return await _infer(name, parse_version(version), request, v2)


# -- the model repository extension (Triton's), served by RSA_MODEL_CONTROL (404 otherwise) -----------


async def _optional_body(request: Request, model: type[BodyT]) -> BodyT:
    """An empty body (what Triton's clients send for the index) means the defaults."""
    if not (await read_body(request)).strip():
        return model()
    return await parse_body(request, model.model_validate_json)


@router.post(
    "/repository/index",
    response_model=list[RepositoryModel],
    responses=ERRORS,
    openapi_extra=body_schema(RepositoryIndexRequest),
)
async def repository_index(request: Request, v2: Handlers) -> list[RepositoryModel]:
    """Every model version on disk or served, with its state (READY, LOADING, UNLOADING, UNAVAILABLE) and
    why; `{"ready": true}` lists the ready ones only. Served with RSA_MODEL_CONTROL=poll or explicit."""
    body = await _optional_body(request, RepositoryIndexRequest)
    return await v2.repository_index(body.ready)


@router.post("/repository/models/{name}/load", responses=ERRORS, openapi_extra=body_schema(RepositoryRequest))
async def repository_load(name: str, request: Request, v2: Handlers) -> Response:
    """Load or reload a model from its folder: new versions are loaded and warmed up beside the served
    ones, which keep serving until the new one is ready. Served with RSA_MODEL_CONTROL=explicit."""
    body = await _optional_body(request, RepositoryRequest)
    await v2.repository_load(name, body.parameters)
    return Response(status_code=200)


@router.post(
    "/repository/models/{name}/unload", responses=ERRORS, openapi_extra=body_schema(RepositoryRequest)
)
async def repository_unload(name: str, request: Request, v2: Handlers) -> Response:
    """Stop admitting to the model's versions, finish what they have, free them. Served with
    RSA_MODEL_CONTROL=explicit."""
    body = await _optional_body(request, RepositoryRequest)
    await v2.repository_unload(name, body.parameters)
    return Response(status_code=200)
