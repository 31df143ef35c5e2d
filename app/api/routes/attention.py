"""Attention inspection: per layer and head, the softmax, REM and mixed L×L matrices, as JSON or PNG."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from app.api.body import body_schema, parse_body
from app.api.deps import ModelName, ModelVersionNumber, V1HandlersDep
from app.api.routes.responses import INFERENCE_ERRORS
from app.protocols.rsa_v1.schemas import AttentionRequest, AttentionResponse, OutputFormat

router = APIRouter(prefix="/v1/models", tags=["attention"])

FormatQuery = Annotated[
    OutputFormat | None, Query(description="json or png; overrides the body's `format` when given.")
]
RESPONSES: dict[int | str, dict[str, Any]] = {
    **INFERENCE_ERRORS,
    200: {"content": {"image/png": {}}, "description": "JSON, or a PNG heatmap figure with format=png."},
}


async def _respond(
    v1: V1HandlersDep, name: str, version: int | None, body: AttentionRequest, fmt: OutputFormat | None
) -> AttentionResponse | Response:
    if (fmt or body.format) == "png":
        return Response(await v1.attention_png(name, version, body), media_type="image/png")
    # JSON bytes encoded by orjson from the arrays (app/protocols/rsa_v1/wire.py); `response_model`
    # stays for the OpenAPI document.
    return Response(await v1.attention(name, version, body), media_type="application/json")


@router.post(
    "/{name}/attention",
    response_model=AttentionResponse,
    responses=RESPONSES,
    openapi_extra=body_schema(AttentionRequest),
)
async def attention(
    name: ModelName, request: Request, v1: V1HandlersDep, format: FormatQuery = None
) -> AttentionResponse | Response:
    """Attention matrices of one series with the model's latest loaded version."""
    return await _respond(
        v1, name, None, await parse_body(request, AttentionRequest.model_validate_json), format
    )


@router.post(
    "/{name}/versions/{version}/attention",
    response_model=AttentionResponse,
    responses=RESPONSES,
    openapi_extra=body_schema(AttentionRequest),
)
async def attention_version(
    name: ModelName,
    version: ModelVersionNumber,
    request: Request,
    v1: V1HandlersDep,
    format: FormatQuery = None,
) -> AttentionResponse | Response:
    """Attention matrices of one series with a given model version."""
    return await _respond(
        v1, name, version, await parse_body(request, AttentionRequest.model_validate_json), format
    )
