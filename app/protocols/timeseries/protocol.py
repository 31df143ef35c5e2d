"""KServe's time-series API (`/v1/timeseries`), as the registry (app/protocols/registry.py) wires it.
Named `kserve_timeseries`, the `protocol` label its request metrics have always carried."""

from __future__ import annotations

from app.protocols.spec import ErrorRenderer, ProtocolSpec
from app.protocols.timeseries import errors
from app.protocols.timeseries.codec import parse_request
from app.protocols.timeseries.handlers import TimeSeriesHandlers
from app.protocols.timeseries.routes import router
from app.protocols.timeseries.schemas import TimeSeriesForecastRequest

KSERVE_TIMESERIES = ProtocolSpec(
    name="kserve_timeseries",
    prefix="/v1/timeseries",
    errors=ErrorRenderer(errors.error_response_for, errors.render_error, errors.on_unexpected_error),
    handlers=lambda service, draining: TimeSeriesHandlers(service),
    routers=(router,),
    bodies=(TimeSeriesForecastRequest,),
    parsers=(parse_request,),
)
