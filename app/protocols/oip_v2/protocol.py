"""The Open Inference Protocol v2, as the registry (app/protocols/registry.py) wires it: REST under `/v2`,
and gRPC (grpc_server.py) on RSA_GRPC_PORT when it is set, whose calls carry the `oip_v2_grpc` label."""

from __future__ import annotations

from app.observability.metrics import GRPC_SERVICE
from app.protocols.oip_v2 import errors
from app.protocols.oip_v2.codec import parse_infer
from app.protocols.oip_v2.handlers import OipV2Handlers
from app.protocols.oip_v2.routes import INFER_ROUTES, health, router
from app.protocols.oip_v2.schemas import InferenceRequest, RepositoryIndexRequest, RepositoryRequest
from app.protocols.spec import ErrorRenderer, ProtocolSpec, Server
from app.runtime import Runtime


def grpc_server(runtime: Runtime) -> Server | None:
    settings = runtime.settings
    if settings.grpc_port is None:
        return None
    # Imported only here: its generated messages cannot share a process with tritonclient's (README.md),
    # and a service without gRPC needs none of it.
    from app.protocols.oip_v2.grpc_server import GrpcServer

    return GrpcServer(settings, runtime.handlers_of(OipV2Handlers), runtime.api_keys, runtime.metrics)


OIP_V2 = ProtocolSpec(
    name="oip_v2",
    prefix="/v2",
    errors=ErrorRenderer(errors.error_response_for, errors.render_error, errors.on_unexpected_error),
    handlers=OipV2Handlers,
    routers=(router,),
    open_routers=(health,),  # liveness and readiness, open like /healthz
    bodies=(InferenceRequest, RepositoryIndexRequest, RepositoryRequest),
    admitted=INFER_ROUTES,
    probes=("/v2/health/live", "/v2/health/ready"),
    parsers=(parse_infer,),
    servers=(grpc_server,),
    other_labels={GRPC_SERVICE: "oip_v2_grpc"},
)
