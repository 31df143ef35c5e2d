"""The Open Inference Protocol v2 over gRPC: KServe's `inference.GRPCInferenceService` (ServerLive,
ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer), served by grpc.aio on the service's
own event loop, beside HTTP, on RSA_GRPC_PORT.

Every RPC goes through what an HTTP request does: a request record with its deadline (the server's
timeout, or less when the client's gRPC deadline is shorter), the API keys (metadata `authorization:
Bearer <key>`; the health RPCs are open, like /healthz), the same handlers and batcher, and the metrics
(endpoint `/inference.GRPCInferenceService/<Method>`, protocol `oip_v2_grpc`, code the gRPC status name).
The repository-model RPCs of the proto are not served (UNIMPLEMENTED): models load at start-up.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import TypeVar

import grpc
import numpy as np

from app.core import errors
from app.core.config import Settings
from app.core.context import RequestRecord, close_record, note_error, open_record
from app.core.errors import InvalidInput, ServiceError
from app.core.security import ApiKeys
from app.observability.metrics import GRPC_SERVICE, RequestMetrics
from app.protocols.oip_v2 import grpc_predict_v2_pb2 as pb
from app.protocols.oip_v2 import grpc_predict_v2_pb2_grpc as pb_grpc
from app.protocols.oip_v2.codec import DATATYPE_OF, InferResult, Tensor, layout
from app.protocols.oip_v2.handlers import OipV2Handlers, parse_version
from app.protocols.status import lookup

logger = logging.getLogger(__name__)

T = TypeVar("T")
Req = TypeVar("Req")
Resp = TypeVar("Resp")
PROBES = frozenset({"ServerLive", "ServerReady"})

# Domain error -> gRPC status (app/protocols/status.py: HTTP_STATUS is the HTTP protocols' table).
STATUS: dict[type[ServiceError], grpc.StatusCode] = {
    errors.InvalidInput: grpc.StatusCode.INVALID_ARGUMENT,
    errors.PayloadTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.ModelNotFound: grpc.StatusCode.NOT_FOUND,
    errors.ModelNotReady: grpc.StatusCode.UNAVAILABLE,
    errors.Overloaded: grpc.StatusCode.UNAVAILABLE,  # retryable, as gRPC clients treat UNAVAILABLE
    errors.Timeout: grpc.StatusCode.DEADLINE_EXCEEDED,
    errors.InferenceError: grpc.StatusCode.INTERNAL,
    errors.NotServed: grpc.StatusCode.UNIMPLEMENTED,  # the repository API outside its RSA_MODEL_CONTROL
    errors.TooManyVersions: grpc.StatusCode.RESOURCE_EXHAUSTED,  # RSA_MAX_LOADED_VERSIONS
    errors.DeviceError: grpc.StatusCode.UNAVAILABLE,  # the device failed under a valid request: retry
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
}


def status_of(exc: ServiceError) -> grpc.StatusCode:
    return lookup(STATUS, exc, grpc.StatusCode.INTERNAL)


def decode_inputs(request: pb.ModelInferRequest) -> list[Tensor]:
    """The request's tensors, from `raw_input_contents` (one per input, in order) or typed `contents`."""
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise InvalidInput(
            f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs: give one per input",
            field="raw_input_contents",
            limit=len(request.inputs),
        )
    tensors = []
    for i, item in enumerate(request.inputs):
        tensor = layout(i, item.name, item.datatype, item.shape)  # REST's checks (codec.py)
        if raw and item.HasField("contents"):
            # Triton refuses this too: one of the two would be silently dropped
            raise InvalidInput(
                f"{tensor.field}: give `contents` or raw_input_contents, not both",
                field=f"inputs[{i}].contents",
            )
        if raw:
            tensors.append(tensor.from_bytes(raw[i], f"raw_input_contents[{i}]"))
        else:
            values = item.contents.fp32_contents if item.datatype == "FP32" else item.contents.int64_contents
            tensors.append(tensor.from_values(values, "contents"))
    return tensors


def encode_response(result: InferResult) -> pb.ModelInferResponse:
    """Outputs as raw little-endian bytes (`raw_output_contents`), as Triton answers."""
    response = pb.ModelInferResponse(
        model_name=result.model_name, model_version=result.model_version, id=result.id or ""
    )
    for name, array in result.outputs.items():
        data = np.ascontiguousarray(array)
        response.outputs.add(name=name, datatype=DATATYPE_OF[data.dtype], shape=list(data.shape))
        response.raw_output_contents.append(data.tobytes())
    if result.filled:
        response.parameters["filled"].int64_param = result.filled
    return response


def _rpc(
    answer: Callable[[InferenceServicer, Req], Awaitable[Resp]],
) -> Callable[[InferenceServicer, Req, grpc.aio.ServicerContext], Awaitable[Resp]]:
    """An RPC of the proto (`(self, request, context)`) from the method that answers its request, run by
    `InferenceServicer._serve` under the method's name: a request record with its deadline, the API keys
    unless a probe, the metrics, a domain error as its gRPC status."""

    @functools.wraps(answer)
    async def rpc(self: InferenceServicer, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        return await self._serve(answer.__name__, context, lambda: answer(self, request))

    return rpc


class InferenceServicer(pb_grpc.GRPCInferenceServiceServicer):
    def __init__(self, handlers: OipV2Handlers, api_keys: ApiKeys, metrics: RequestMetrics) -> None:
        self.handlers = handlers
        self.api_keys = api_keys
        self.metrics = metrics
        self.timeout_s = handlers.settings.request_timeout_s

    async def _serve(
        self, method: str, context: grpc.aio.ServicerContext, run: Callable[[], Awaitable[T]]
    ) -> T:
        """`run` within a request record (deadline, labels), behind the API keys unless a probe, counted in
        the metrics; a domain error ends the call with its gRPC status and our message."""
        start = perf_counter()
        remaining = context.time_remaining()
        timeout = self.timeout_s if remaining is None else min(self.timeout_s, remaining)
        record, token = open_record(start, timeout)
        probe = method in PROBES
        if not probe:
            self.metrics.in_flight.inc()
        code, message = grpc.StatusCode.OK, ""
        try:
            if not probe:
                self.api_keys.check(_authorization(context))
            return await run()
        except ServiceError as exc:
            code, message = status_of(exc), exc.message
            note_error(exc.code)
            if code in (
                grpc.StatusCode.INTERNAL,
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            ):
                logger.warning("gRPC %s -> %s %s: %s", method, code.name, exc.code, exc.message)
        except Exception:
            logger.exception("unhandled error in gRPC %s", method)
            code, message = grpc.StatusCode.INTERNAL, "internal server error"
            note_error("internal_error")
        finally:
            close_record(token)
            try:
                self.metrics.observe_request(
                    GRPC_SERVICE + method, record, code.name, perf_counter() - start, probe
                )
            finally:  # after the count, as over HTTP (app/api/middleware.py)
                if not probe:
                    self.metrics.in_flight.dec()
        await context.abort(code, message)  # raises: the call ends here with that status
        raise AssertionError("unreachable: context.abort raises")

    @_rpc
    async def ServerLive(  # noqa: N802  (the proto's method names)
        self, request: pb.ServerLiveRequest
    ) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    @_rpc
    async def ServerReady(  # noqa: N802
        self, request: pb.ServerReadyRequest
    ) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self.handlers.server_ready())

    @_rpc
    async def ModelReady(  # noqa: N802
        self, request: pb.ModelReadyRequest
    ) -> pb.ModelReadyResponse:
        ready = self.handlers.model_ready(request.name, parse_version(request.version))
        return pb.ModelReadyResponse(ready=ready)

    @_rpc
    async def ServerMetadata(  # noqa: N802
        self, request: pb.ServerMetadataRequest
    ) -> pb.ServerMetadataResponse:
        meta = self.handlers.server_metadata()
        return pb.ServerMetadataResponse(name=meta.name, version=meta.version, extensions=meta.extensions)

    @_rpc
    async def ModelMetadata(  # noqa: N802
        self, request: pb.ModelMetadataRequest
    ) -> pb.ModelMetadataResponse:
        meta = self.handlers.model_metadata(request.name, parse_version(request.version))
        tensors = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=meta.name,
            versions=meta.versions,
            platform=meta.platform,
            inputs=[tensors(name=t.name, datatype=t.datatype, shape=t.shape) for t in meta.inputs],
            outputs=[tensors(name=t.name, datatype=t.datatype, shape=t.shape) for t in meta.outputs],
        )

    @_rpc
    async def ModelInfer(  # noqa: N802
        self, request: pb.ModelInferRequest
    ) -> pb.ModelInferResponse:
        version = parse_version(request.model_version)
        outputs = [o.name for o in request.outputs] or None
        result = await self.handlers.infer(
            request.model_name, version, decode_inputs(request), outputs, request.id or None
        )
        return encode_response(result)

    @_rpc
    async def RepositoryIndex(  # noqa: N802
        self, request: pb.RepositoryIndexRequest
    ) -> pb.RepositoryIndexResponse:
        rows = await self.handlers.repository_index(request.ready)
        entry = pb.RepositoryIndexResponse.ModelIndex
        return pb.RepositoryIndexResponse(
            models=[entry(name=r.name, version=r.version or "", state=r.state, reason=r.reason) for r in rows]
        )

    @_rpc
    async def RepositoryModelLoad(  # noqa: N802
        self, request: pb.RepositoryModelLoadRequest
    ) -> pb.RepositoryModelLoadResponse:
        name = _model_name(request)
        await self.handlers.repository_load(name, request.parameters)
        return pb.RepositoryModelLoadResponse(model_name=name, isLoaded=True)

    @_rpc
    async def RepositoryModelUnload(  # noqa: N802
        self, request: pb.RepositoryModelUnloadRequest
    ) -> pb.RepositoryModelUnloadResponse:
        name = _model_name(request)
        await self.handlers.repository_unload(name, request.parameters)
        return pb.RepositoryModelUnloadResponse(model_name=name, isUnloaded=True)


def _model_name(request: pb.RepositoryModelLoadRequest | pb.RepositoryModelUnloadRequest) -> str:
    """The model a repository request names. Triton's layout has it in field 2; KServe's (the proto this
    one was vendored from) in field 1, which Triton's calls `repository_name`: one of them, not both."""
    name = request.model_name or request.repository_name
    if not name:
        raise InvalidInput("model_name is required", field="model_name")
    return name


def _authorization(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return value if isinstance(value, str) else value.decode()
    return None


class ApiKeyInterceptor(grpc.aio.ServerInterceptor):
    """The API key checked from the call's metadata before its message is read. A call refused here ends
    with UNAUTHENTICATED or PERMISSION_DENIED (the servicer's own message) through a handler that never
    reads the request: the servicer's check comes after the whole message has been received, and 32
    unauthenticated calls of 60 MiB held 1.8 GiB until they were refused (issue 32)."""

    def __init__(self, api_keys: ApiKeys, metrics: RequestMetrics) -> None:
        self.api_keys = api_keys
        self.metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method.rsplit("/", 1)[-1]
        if method not in PROBES:
            metadata = handler_call_details.invocation_metadata or ()
            authorization = next((v for k, v in metadata if k == "authorization"), None)
            try:
                self.api_keys.check(
                    authorization if not isinstance(authorization, bytes) else authorization.decode()
                )
            except ServiceError as exc:
                return self._refusal(method, exc)
        return await continuation(handler_call_details)

    def _refusal(self, method: str, exc: ServiceError) -> grpc.RpcMethodHandler:
        start = perf_counter()
        code = status_of(exc)

        async def refuse(requests: object, context: grpc.aio.ServicerContext) -> None:
            self.metrics.observe_request(
                GRPC_SERVICE + method,
                RequestRecord(error_code=exc.code),
                code.name,
                perf_counter() - start,
                False,
            )
            await context.abort(code, exc.message)

        # A stream handler is given the request as an iterator it may leave unread (a unary one is handed
        # the message, read whole first); on the wire a unary call is a stream of one message.
        return grpc.stream_unary_rpc_method_handler(refuse)


class GrpcServer:
    """The gRPC server's life: bound and started with the service, stopped (in-flight calls finish within
    the grace period, new ones refused) when it shuts down.

    Bounds: messages up to RSA_MAX_BODY_BYTES (the HTTP body limit; the default 4 MiB would refuse a batch
    /v1 accepts), at most RSA_GRPC_MAX_STREAMS calls at once on one connection (HTTP/2's
    max_concurrent_streams) and RSA_MAX_CONNECTIONS in the whole server (RESOURCE_EXHAUSTED above, before
    the message is read), and with API keys the key checked before the message is read."""

    def __init__(
        self, settings: Settings, handlers: OipV2Handlers, api_keys: ApiKeys, metrics: RequestMetrics
    ) -> None:
        assert settings.grpc_port is not None
        self.address = f"{settings.host}:{settings.grpc_port}"
        self.grace_s = settings.graceful_shutdown_s
        self.server = grpc.aio.server(
            interceptors=[ApiKeyInterceptor(api_keys, metrics)] if api_keys.enabled else None,
            options=[
                ("grpc.max_receive_message_length", settings.max_body_bytes),
                ("grpc.max_send_message_length", -1),
                ("grpc.max_concurrent_streams", settings.grpc_max_streams),
            ],
            maximum_concurrent_rpcs=settings.max_connections,
        )
        pb_grpc.add_GRPCInferenceServiceServicer_to_server(
            InferenceServicer(handlers, api_keys, metrics), self.server
        )

    async def start(self) -> None:
        try:
            self.server.add_insecure_port(self.address)
        except RuntimeError as exc:  # grpc.aio's way to say the port cannot be bound
            raise RuntimeError(f"RSA_GRPC_PORT: cannot listen on {self.address}: {exc}") from exc
        await self.server.start()
        logger.info("gRPC (OIP v2, inference.GRPCInferenceService) on %s", self.address)

    async def stop(self) -> None:
        await self.server.stop(self.grace_s)
