"""KServe's time-series forecast API on the inference service: every input of a request in one batched
call (so they share the session with every other protocol's requests), answered in KServe's shape.

Beyond KServe's own server: multivariate series for multivariate models (rows of one value per channel,
in the manifest's order), every error with its code, and quantiles only from calibrated intervals
(`app.protocols.intervals.check_intervals`; a clear 400 `no_calibrated_intervals` until a model has them).
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import orjson

from app.core.errors import InvalidInput, NonFiniteResult
from app.inference.service import InferenceService
from app.protocols.intervals import check_intervals
from app.protocols.timeseries.codec import check_frequency, decode_input, forecast_start
from app.protocols.timeseries.schemas import TimeSeriesForecastRequest


class TimeSeriesHandlers:
    def __init__(self, service: InferenceService) -> None:
        self.service = service
        self.settings = service.settings

    def models(self) -> list[str]:
        """Names of the models that can forecast now (a version loaded), as KServe lists them."""
        return [served.name for served in self.service.models() if served.latest is not None]

    async def forecast(self, request: TimeSeriesForecastRequest) -> bytes:
        """The KServe response as JSON bytes (each float32 in its shortest exact form, as `/v1` writes)."""
        mv = self.service.resolve(request.model, None)
        manifest = mv.manifest
        assert manifest is not None  # the registry hands out ready versions only
        horizon = request.options.horizon
        if horizon > manifest.horizon:
            raise InvalidInput(
                f"options.horizon is {horizon}; model {mv.name} forecasts at most {manifest.horizon} steps",
                field="options.horizon",
                limit=manifest.horizon,
            )
        if request.options.quantiles:  # before any series work: nothing else can make the answer possible
            check_intervals(mv, request.options.quantiles, "options.quantiles")
        limit = self.settings.max_series_per_request
        if len(request.inputs) > limit:
            raise InvalidInput(
                f"inputs has {len(request.inputs)} series; at most {limit} are accepted",
                field="inputs",
                limit=limit,
            )
        decoded = []
        for i, item in enumerate(request.inputs):
            check_frequency(item, manifest, f"inputs[{i}].frequency")
            decoded.append(decode_input(item, manifest, f"inputs[{i}]", self.settings.max_history_length))
        starts = [forecast_start(d, manifest, f"inputs[{i}]") for i, d in enumerate(decoded)]
        windows = np.stack([d.window for d in decoded])
        phases = None if manifest.cycle is None else np.array([d.phase for d in decoded], np.int64)
        forecast = (await self.service.forecast(mv, windows, phases))[:, :horizon]
        finite = np.isfinite(forecast.reshape(len(forecast), -1)).all(axis=1)
        if not finite.all():
            i = int(np.argmin(finite))
            raise NonFiniteResult(
                f"the model's forecast for inputs[{i}] is not finite: its values are outside what the model "
                "can handle; rescale them",
                field=f"inputs[{i}]",
            )
        outputs = []
        for i, item in enumerate(request.inputs):
            mean = forecast[i, :, 0] if item.type == "univariate_time_series" else forecast[i]
            content = {
                "type": item.type,
                "name": item.name,
                "mean_forecast": np.ascontiguousarray(mean),
                "frequency": item.frequency,
                "start_timestamp": starts[i],
            }
            outputs.append(
                {
                    "type": "time_series_forecast",
                    "id": f"ts_{uuid.uuid4().hex}",
                    "status": "completed",
                    "content": [content],
                }
            )
        response = {
            "id": f"resp_{uuid.uuid4().hex}",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "model": mv.name,
            "outputs": outputs,
            "usage": None,
        }
        return orjson.dumps(response, option=orjson.OPT_SERIALIZE_NUMPY)
