"""The data plane: decode a request into arrays, run it (batcher or inspection session), encode.

Knows the request/response schemas and the domain errors, nothing about HTTP.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import numpy as np

from app.artifacts.manifest import Manifest
from app.core.config import Settings
from app.core.errors import InvalidInput, Overloaded, Timeout
from app.inference.batching import DynamicBatcher
from app.inference.registry import ModelRegistry, ModelVersion, ServedModel
from app.inference.session import InspectResult, OnnxModel
from app.observability.context import note_model_version
from app.protocols.rsa_v1.codec import (
    DecodedSeries,
    decode_series,
    forecast_timestamps,
    resolve_channel,
    resolve_horizon,
)
from app.protocols.rsa_v1.plotting import render_attention_png
from app.protocols.rsa_v1.schemas import (
    AttentionRequest,
    AttentionResponse,
    BatchingStats,
    ChannelRef,
    CycleInfo,
    FileInfo,
    ForecastRequest,
    ForecastResponse,
    HeadAttention,
    HeadInfo,
    LayerAttention,
    LayerInfo,
    MatrixName,
    MatrixSet,
    ModelInfo,
    ModelList,
    SeriesForecast,
    VersionInfo,
)


class DataPlane:
    """Forecast, attention and metadata operations on the registry's models, for any transport."""

    def __init__(self, registry: ModelRegistry, settings: Settings) -> None:
        self.registry = registry
        self.settings = settings
        self._attention_in_flight = 0

    def _resolve(self, name: str, version: int | None) -> ModelVersion:
        """The ready version that serves this request ("latest" resolved), noted for the metrics."""
        mv = self.registry.get(name, version)
        note_model_version(mv.name, mv.version)
        return mv

    # -- forecast --------------------------------------------------------------------------------
    async def forecast(self, name: str, version: int | None, request: ForecastRequest) -> ForecastResponse:
        mv = self._resolve(name, version)
        manifest, model, batcher = _loaded(mv)
        limit = self.settings.max_series_per_request
        if len(request.series) > limit:
            raise InvalidInput(
                f"series has {len(request.series)} items; at most {limit} are accepted",
                field="series",
                limit=limit,
            )
        horizon = resolve_horizon(request.horizon, manifest)
        decoded = [
            decode_series(s, manifest, f"series[{i}]", self.settings.max_history_length)
            for i, s in enumerate(request.series)
        ]
        # Timestamps before the session call: a start too close to the calendar's end is the
        # client's mistake, and must not cost a model run first.
        stamps = [
            _timestamps(d.start, d.n_values, horizon, manifest.frequency_seconds, f"series[{i}].start")
            for i, d in enumerate(decoded)
        ]
        feed = model.feed(np.stack([d.window for d in decoded]), _phases(decoded))  # [S, L, C] (+ [S])
        outputs = await batcher.submit(feed, self.settings.request_timeout_s)  # [S, H, C]
        channels = list(manifest.channels)
        forecasts = [
            SeriesForecast.model_construct(
                id=d.id, forecast=outputs[i, :horizon].tolist(), channels=channels, timestamps=stamps[i]
            )
            for i, d in enumerate(decoded)
        ]
        return ForecastResponse(
            model=mv.name, version=mv.version, provider=model.provider, forecasts=forecasts
        )

    # -- attention -------------------------------------------------------------------------------
    async def attention(self, name: str, version: int | None, request: AttentionRequest) -> AttentionResponse:
        mv = self._resolve(name, version)
        manifest, model, _ = _loaded(mv)
        channel = resolve_channel(request.channel, manifest)
        decoded = decode_series(request.series, manifest, "series", self.settings.max_history_length)
        if manifest.n_layers is not None and request.layers is not None:
            _check_layers(request.layers, manifest.n_layers)  # before paying for the session call
        result = await self._inspect(mv.name, model, decoded.window[None], _phases([decoded]))
        n_layers = int(result.rem.shape[0])
        layers = request.layers if request.layers is not None else list(range(n_layers))
        _check_layers(layers, n_layers)
        arrays: dict[MatrixName, np.ndarray] = {
            "softmax": result.softmax[0, channel],  # [N, Hh, L, L]
            "rem": result.rem,
            "mixed": result.mixed[0, channel],
        }
        wanted = list(dict.fromkeys(request.matrices))
        out_layers = [
            _layer_attention(manifest, layer, arrays, wanted, request.average_heads) for layer in layers
        ]
        provider = model.inspect_provider or model.provider
        return AttentionResponse(
            model=mv.name,
            version=mv.version,
            provider=provider,
            channel=ChannelRef(index=channel, name=manifest.channels[channel]),
            input_length=manifest.input_length,
            layers=out_layers,
        )

    async def attention_png(self, name: str, version: int | None, request: AttentionRequest) -> bytes:
        """The attention figure as PNG bytes (rendered in the executor: matplotlib is slow)."""
        result = await self.attention(name, version, request)
        matrices = list(dict.fromkeys(request.matrices))
        return await self.registry.run_blocking(render_attention_png, result, matrices)

    async def _inspect(
        self, name: str, model: OnnxModel, windows: np.ndarray, phases: np.ndarray | None
    ) -> InspectResult:
        """The inspection session call, bounded like the batcher: at most `max_attention_in_flight`
        calls (503 above) and the request timeout (504). A timed-out call still holds its slot until
        its thread really finishes, so timeouts cannot pile up work behind the bound."""
        limit = self.settings.max_attention_in_flight
        if self._attention_in_flight >= limit:
            raise Overloaded(
                f"model {name}: {self._attention_in_flight} attention calls in flight; retry later",
                limit=limit,
                retry_after_s=self.settings.retry_after_s,
            )
        self._attention_in_flight += 1
        call = asyncio.ensure_future(self.registry.run_blocking(model.inspect, windows, phases))
        call.add_done_callback(self._release_attention_slot)
        timeout = self.settings.request_timeout_s
        try:
            return await asyncio.wait_for(asyncio.shield(call), timeout)
        except TimeoutError:
            raise Timeout(f"model {name}: no attention result within {timeout:g}s", limit=timeout) from None

    def _release_attention_slot(self, call: asyncio.Future) -> None:
        self._attention_in_flight -= 1
        if not call.cancelled():
            call.exception()  # retrieved, so a call whose client timed out logs no "never retrieved"

    # -- metadata --------------------------------------------------------------------------------
    def models(self) -> ModelList:
        return ModelList(models=[describe_model(served) for served in self.registry.models.values()])

    def model(self, name: str) -> ModelInfo:
        return describe_model(self.registry.model(name))


def _check_layers(layers: list[int], n_layers: int) -> None:
    for i, layer in enumerate(layers):
        if not 0 <= layer < n_layers:
            raise InvalidInput(
                f"layers[{i}] = {layer} is out of range 0..{n_layers - 1}",
                field=f"layers[{i}]",
                limit=n_layers - 1,
            )


def describe_version(mv: ModelVersion) -> VersionInfo:
    info = VersionInfo(version=mv.version, state=mv.state, error=mv.error)
    if mv.model is not None and mv.model.loaded:
        info.provider = mv.model.provider
    if mv.batcher is not None:
        s = mv.batcher.stats
        info.batching = BatchingStats(
            session_calls=s.session_calls,
            rows=s.rows,
            failed_calls=s.failed_calls,
            rejected_requests=s.rejected_items,
            expired_requests=s.expired_items,
            dropped_requests=s.dropped_items,
        )
    m = mv.manifest
    if m is not None:
        info = info.model_copy(
            update={
                "created": m.created,
                "input_length": m.input_length,
                "horizon": m.horizon,
                "channels": list(m.channels),
                "frequency": m.frequency,
                "frequency_seconds": m.frequency_seconds,
                "cycle": None
                if m.cycle is None
                else CycleInfo(period=m.cycle.period, step_seconds=m.cycle.step_seconds),
                "layers": [
                    LayerInfo(
                        layer=spec.layer,
                        gate_mode=spec.gate_mode,
                        heads=[
                            HeadInfo(
                                head=h.head,
                                kind=h.kind,
                                dilation=h.dilation,
                                lambda_=h.lambda_,
                                gamma=h.gamma,
                                theta=h.theta,
                                gate=h.gate,
                            )
                            for h in spec.heads
                        ],
                    )
                    for spec in m.layers
                ],
                "architecture": m.architecture,
                "metrics": m.metrics,
                "dataset": m.dataset,
                "verification": m.verification,
                "opset": m.opset,
                "files": {k: FileInfo(sha256=f.sha256, bytes=f.bytes) for k, f in m.files.items()},
            }
        )
    return info


def describe_model(served: ServedModel) -> ModelInfo:
    latest = served.latest
    return ModelInfo(
        name=served.name,
        ready=served.ready,
        latest_version=latest.version if latest else None,
        error=served.error,
        versions=[describe_version(mv) for _, mv in sorted(served.versions.items())],
    )


def _matrix_set(
    arrays: dict[MatrixName, np.ndarray], wanted: list[MatrixName], select: tuple[int, int]
) -> MatrixSet:
    return MatrixSet.model_construct(**{m: np.asarray(arrays[m][select]).tolist() for m in wanted})


def _layer_attention(
    manifest: Manifest,
    layer: int,
    arrays: dict[MatrixName, np.ndarray],
    wanted: list[MatrixName],
    average: bool,
) -> LayerAttention:
    n_heads = arrays["rem"].shape[1]
    spec = manifest.layer(layer)
    heads = []
    for h in range(n_heads):
        head = manifest.head(layer, h)
        heads.append(
            HeadAttention(
                head=h,
                kind=head.kind if head else None,
                dilation=head.dilation if head else None,
                lambda_=head.lambda_ if head else None,
                gamma=head.gamma if head else None,
                theta=head.theta if head else None,
                gate=head.gate if head else None,
                matrices=None if average else _matrix_set(arrays, wanted, (layer, h)),
            )
        )
    mean = None
    if average:
        means = {m: arrays[m][layer].mean(axis=0) for m in wanted}
        mean = MatrixSet.model_construct(**{m: v.tolist() for m, v in means.items()})
    return LayerAttention(layer=layer, gate_mode=spec.gate_mode if spec else None, heads=heads, mean=mean)


def _loaded(mv: ModelVersion) -> tuple[Manifest, OnnxModel, DynamicBatcher]:
    """The parts of a version the registry only hands out once it is ready."""
    assert mv.manifest is not None and mv.model is not None and mv.batcher is not None
    return mv.manifest, mv.model, mv.batcher


def _phases(decoded: list[DecodedSeries]) -> np.ndarray | None:
    """One int64 phase per series for a cycle model (decoding gave every series one), else None."""
    if decoded[0].phase is None:
        return None
    return np.array([d.phase for d in decoded], np.int64)


def _timestamps(
    start: datetime | None, n_values: int, horizon: int, step_s: float, field: str
) -> list[datetime] | None:
    if start is None:
        return None
    try:
        return forecast_timestamps(start, n_values, horizon, step_s)
    except OverflowError:
        raise InvalidInput(
            f"{field}: the forecast would run past the last representable date (year 9999)", field=field
        ) from None
