"""The Open Inference Protocol v2 over REST, as the registry (app/protocols/registry.py) wires it. Its
gRPC transport (grpc_server.py) is started by the lifespan when RSA_GRPC_PORT is set; its calls carry the
`oip_v2_grpc` label."""

from __future__ import annotations

from app.observability.metrics import GRPC_SERVICE
from app.protocols.oip_v2 import errors
from app.protocols.oip_v2.codec import parse_infer
from app.protocols.oip_v2.handlers import OipV2Handlers
from app.protocols.oip_v2.routes import INFER_ROUTES, health, router
from app.protocols.oip_v2.schemas import InferenceRequest, RepositoryIndexRequest, RepositoryRequest
from app.protocols.spec import ErrorRenderer, ProtocolSpec

OIP_V2 = ProtocolSpec(
    name="oip_v2",
    prefix="/v2",
    errors=ErrorRenderer(errors.error_response_for, errors.render_error, errors.on_unexpected_error),
    handlers=OipV2Handlers,
    routers=(router,),
    open_routers=(health,),  # liveness and readiness, open like /healthz
    bodies=(InferenceRequest, RepositoryIndexRequest, RepositoryRequest),
    admitted=INFER_ROUTES,
    parsers=(parse_infer,),
    other_labels={GRPC_SERVICE: "oip_v2_grpc"},
)
