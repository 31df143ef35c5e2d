"""KServe's time-series forecast API on the inference service: every input of a request in one batched
call (so they share the session with every other protocol's requests), answered in KServe's shape.

Beyond KServe's own server: multivariate series for multivariate models (rows of one value per channel,
in the manifest's order), every error with its code, and `options.quantiles` answered from the version's
calibrated intervals (`app.inference.intervals`, as `/v1`'s `quantiles`): each output's
`content[].quantiles` holds, per requested probability keyed by `str(q)` as KServe writes it ("0.1"), a
list shaped like `mean_forecast`; a version without intervals is a 400 `no_calibrated_intervals`, an
uncalibrated probability a 400 `interval_not_calibrated` listing the available ones.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import orjson

from app.core.errors import InvalidInput, ModelNotFound
from app.inference.intervals import check_quantiles, quantile_bounds
from app.inference.service import InferenceService
from app.inference.windows import check_horizon, check_series_count, require_finite
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
        try:
            entry = self.service.resolve(request.model, None)
        except ModelNotFound as exc:
            exc.field = "model"  # KServe's request field; the catalog names the path's `name`
            raise
        manifest = entry.manifest
        assert manifest is not None  # the catalog resolves ready versions only
        layout = manifest.panel.layout if manifest.panel is not None else None
        if layout is not None:  # docs/protocols.md: covariates are not part of KServe's time-series API
            names = [c["name"] for c in layout.describe()]
            raise InvalidInput(
                f"model {entry.name} reads covariates {names}, and KServe's time-series API has no field "
                f"for covariates: forecast it on /v1/models/{entry.name}/forecast (per series `future`, "
                f"`past`, `static`) or OIP v2 /v2/models/{entry.name}/infer",
                field="model",
            )
        horizon = check_horizon(request.options.horizon, manifest, "options.horizon")
        # An empty list asks for nothing, as in KServe's server. Checked before any series work: a
        # quantile the version cannot answer makes the whole request impossible.
        quantiles = request.options.quantiles or None
        if quantiles is not None:
            check_quantiles(manifest.intervals, quantiles, "options.quantiles")
        check_series_count(len(request.inputs), self.settings.max_series_per_request, "inputs")
        decoded = []
        for i, item in enumerate(request.inputs):
            check_frequency(item, manifest, f"inputs[{i}].frequency")
            decoded.append(decode_input(item, manifest, f"inputs[{i}]", self.settings.max_history_length))
        starts = [forecast_start(d, manifest, f"inputs[{i}]") for i, d in enumerate(decoded)]
        windows = np.stack([d.window for d in decoded])
        phases = None if manifest.cycle is None else np.array([d.phase for d in decoded], np.int64)
        forecast = (await self.service.forecast(entry, windows, phases, latest=True))[:, :horizon]
        # Each [S, h, C], from the first h steps' widths (as /v1 answers a shorter horizon), keyed as
        # KServe keys them: str(q) of the probability as sent, "0.1".
        bands: dict[str, np.ndarray] = {}
        if quantiles is not None:
            values = quantile_bounds(
                manifest.intervals, forecast, quantiles, "options.quantiles", window=windows
            )
            bands = {str(q): values[p] for p, q in enumerate(quantiles)}
        require_finite([forecast, *bands.values()], lambda i: f"inputs[{i}]")
        outputs = []
        for i, item in enumerate(request.inputs):
            univariate = item.type == "univariate_time_series"
            mean = forecast[i, :, 0] if univariate else forecast[i]
            content: dict[str, object] = {
                "type": item.type,
                "name": item.name,
                "mean_forecast": np.ascontiguousarray(mean),
                "frequency": item.frequency,
                "start_timestamp": starts[i],
            }
            if bands:
                content["quantiles"] = {
                    key: np.ascontiguousarray(band[i, :, 0] if univariate else band[i])
                    for key, band in bands.items()
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
            "model": entry.name,
            "outputs": outputs,
            "usage": None,
        }
        return orjson.dumps(response, option=orjson.OPT_SERIALIZE_NUMPY)
