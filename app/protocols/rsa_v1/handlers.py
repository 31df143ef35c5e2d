"""The `/v1` API's handlers: request schemas -> arrays (the codec) -> the inference service -> response
schemas. Knows this protocol's schemas and the domain errors, nothing about HTTP."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import numpy as np

from app.artifacts.manifest import Manifest
from app.core.errors import InvalidInput, NonFiniteResult
from app.inference.intervals import (
    available_quantiles,
    check_levels,
    check_quantiles,
    level_bounds,
    quantile_bounds,
)
from app.inference.registry import ModelVersion, ServedModel
from app.inference.service import InferenceService
from app.inference.session import InspectResult, OnnxModel
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
    HeadAttention,
    HeadInfo,
    IntervalsInfo,
    LayerAttention,
    LayerInfo,
    MatrixName,
    MatrixSet,
    ModelInfo,
    ModelList,
    VersionInfo,
)
from app.protocols.rsa_v1.wire import ForecastArgs, ForecastResult

T = TypeVar("T")


class V1Handlers:
    """The `/v1` API's operations: decode the request, call the inference service, encode the answer."""

    def __init__(self, service: InferenceService) -> None:
        self.service = service
        self.settings = service.settings

    # -- forecast --------------------------------------------------------------------------------
    async def forecast(
        self, name: str, version: int | None, request: ForecastRequest | ForecastArgs
    ) -> ForecastResult:
        mv = self.service.resolve(name, version)
        manifest, model = _loaded(mv)
        limit = self.settings.max_series_per_request
        if len(request.series) > limit:
            raise InvalidInput(
                f"series has {len(request.series)} items; at most {limit} are accepted",
                field="series",
                limit=limit,
            )
        horizon = resolve_horizon(request.horizon, manifest)
        _check_interval_request(manifest, request)  # before the session call: a bad level costs no run
        decoded = [
            decode_series(s, manifest, f"series[{i}]", self.settings.max_history_length)
            for i, s in enumerate(request.series)
        ]
        # Timestamps before the session call: a start too close to the calendar's end is the
        # client's mistake, and must not cost a model run first.
        stamps = [
            _timestamps(d.start, d.n_values, horizon, manifest, f"series[{i}].start")
            for i, d in enumerate(decoded)
        ]
        windows = decoded[0].window[None] if len(decoded) == 1 else np.stack([d.window for d in decoded])
        outputs = await self.service.forecast(mv, windows, _phases(decoded))  # [S, H, C]
        outputs = outputs[:, :horizon]
        _require_finite(outputs, lambda i: f"series[{i}]")
        bands = _bands(manifest, outputs, request, windows)
        for band in bands.values():
            _require_finite(band, lambda i: f"series[{i}]")
        return ForecastResult(
            model=mv.name,
            version=mv.version,
            provider=model.provider,
            channels=list(manifest.channels),
            ids=[d.id for d in decoded],
            outputs=outputs,
            timestamps=stamps,
            bands=bands,
        )

    # -- attention -------------------------------------------------------------------------------
    async def attention(self, name: str, version: int | None, request: AttentionRequest) -> AttentionResponse:
        return await self._attention(name, version, request, lambda response: response)

    async def attention_png(self, name: str, version: int | None, request: AttentionRequest) -> bytes:
        """The attention figure as PNG bytes, rendered inside the inspection slot and deadline."""
        matrices = list(dict.fromkeys(request.matrices))
        return await self._attention(
            name, version, request, lambda response: render_attention_png(response, matrices)
        )

    async def _attention(
        self,
        name: str,
        version: int | None,
        request: AttentionRequest,
        finish: Callable[[AttentionResponse], T],
    ) -> T:
        mv = self.service.resolve(name, version)
        manifest, model = _loaded(mv)
        channel = resolve_channel(request.channel, manifest)
        decoded = decode_series(request.series, manifest, "series", self.settings.max_history_length)
        if manifest.n_layers is not None and request.layers is not None:
            _check_layers(request.layers, manifest.n_layers)  # before paying for the session call
        wanted = list(dict.fromkeys(request.matrices))
        self._check_attention_size(manifest, request, len(wanted))

        def encode(result: InspectResult) -> T:
            for matrices in (result.mixed[:, channel], result.softmax[:, channel]):
                _require_finite(matrices, lambda _: "series")
            n_layers = int(result.rem.shape[0])
            layers = request.layers if request.layers is not None else list(range(n_layers))
            _check_layers(layers, n_layers)
            arrays: dict[MatrixName, np.ndarray] = {
                "softmax": result.softmax[0, channel],  # [N, Hh, L, L], or [N, Hh, L] (last query)
                "rem": result.rem,
                "mixed": result.mixed[0, channel],
            }
            out_layers = [
                _layer_attention(manifest, layer, arrays, wanted, request.average_heads) for layer in layers
            ]
            return finish(
                AttentionResponse(
                    model=mv.name,
                    version=mv.version,
                    provider=model.inspect_provider or model.provider,
                    channel=ChannelRef(index=channel, name=manifest.channels[channel]),
                    input_length=manifest.input_length,
                    query="last" if result.rem.ndim == 3 else "all",
                    layers=out_layers,
                )
            )

        return await self.service.inspect(mv, decoded.window[None], _phases([decoded]), encode)

    def _check_attention_size(self, manifest: Manifest, request: AttentionRequest, n_matrices: int) -> None:
        """The answer's size, known from the manifest, against RSA_MAX_ATTENTION_VALUES."""
        n_layers, n_heads = manifest.n_layers, manifest.n_heads
        if n_layers is None or n_heads is None:
            return  # an older manifest: the layer check after the session call still applies
        layers = len(request.layers) if request.layers is not None else n_layers
        per_layer = 1 if request.average_heads else n_heads
        L = manifest.input_length
        per_matrix, size = (L, f"{L}") if manifest.last_query_only else (L * L, f"{L}^2")
        values = layers * per_layer * n_matrices * per_matrix
        limit = self.settings.max_attention_values
        if values > limit:
            raise InvalidInput(
                f"the answer would hold {values} numbers ({layers} layers x {per_layer} heads x "
                f"{n_matrices} matrices x {size}), over the limit of {limit}: ask for "
                "fewer `matrices` or `layers`, or set `average_heads`",
                field="matrices",
                limit=limit,
            )

    # -- metadata --------------------------------------------------------------------------------
    def models(self) -> ModelList:
        return ModelList(models=[describe_model(served) for served in self.service.models()])

    def model(self, name: str) -> ModelInfo:
        return describe_model(self.service.model(name))


def _check_interval_request(manifest: Manifest, request: ForecastRequest | ForecastArgs) -> None:
    """`level` or `quantiles` (never both), each calibrated in this version (InvalidInput otherwise)."""
    if request.level is not None and request.quantiles is not None:
        raise InvalidInput("give `level` or `quantiles`, not both", field="quantiles")
    if request.level is not None:
        check_levels(manifest.intervals, request.level)
    elif request.quantiles is not None:
        check_quantiles(manifest.intervals, request.quantiles)


def _bands(
    manifest: Manifest, outputs: np.ndarray, request: ForecastRequest | ForecastArgs, windows: np.ndarray
) -> dict[str, np.ndarray]:
    """The answer's extra arrays by key, TimeGPT's names: `lo-80`, `hi-80` per level; `q-5` per quantile
    (`windows`: what the model read, for intervals that scale with each series' spread)."""
    if request.level is not None:
        bounds = level_bounds(manifest.intervals, outputs, request.level, window=windows)
        return {
            name: array
            for level, (lo, hi) in bounds.items()
            for name, array in ((f"lo-{level:g}", lo), (f"hi-{level:g}", hi))
        }
    if request.quantiles is not None:
        values = quantile_bounds(manifest.intervals, outputs, request.quantiles, window=windows)
        return {f"q-{100 * q:g}": values[p] for p, q in enumerate(request.quantiles)}
    return {}


def _require_finite(outputs: np.ndarray, field_of: Callable[[int], str]) -> None:
    """Never a null where the schema promises a number: a non-finite answer ([S, ...], one row per
    series) is an error naming the series (within the input bound, yet the model overflowed on it)."""
    if np.isfinite(outputs).all():  # the usual case, in one pass; the row is looked for only if not
        return
    finite = np.isfinite(outputs.reshape(len(outputs), -1)).all(axis=1)
    if not finite.all():
        where = field_of(int(np.argmin(finite)))
        raise NonFiniteResult(
            f"the model's answer for {where} is not finite: its values are outside what the model can "
            "handle; rescale them",
            field=where,
        )


def _check_layers(layers: list[int], n_layers: int) -> None:
    """Each index in range and named once: a repeated layer would repeat the work and the answer."""
    seen: set[int] = set()
    for i, layer in enumerate(layers):
        if layer in seen:
            raise InvalidInput(f"layers[{i}] = {layer} repeats an earlier entry", field=f"layers[{i}]")
        seen.add(layer)
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
            max_series_per_call=mv.batcher.max_batch_rows,
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
                "kind": m.kind,
                "description": m.description,
                "input_length": m.input_length,
                "horizon": m.horizon,
                "channels": list(m.channels),
                "frequency": m.frequency,
                "frequency_seconds": m.frequency_seconds,
                "cycle": None
                if m.cycle is None
                else CycleInfo(period=m.cycle.period, step_seconds=m.cycle.step_seconds),
                "intervals": None
                if m.intervals is None
                else IntervalsInfo(
                    method=m.intervals.method,
                    levels=list(m.intervals.levels),
                    quantiles=[round(q, 6) for q in available_quantiles(m.intervals)],
                    calibration=m.intervals.calibration,
                ),
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


def _loaded(mv: ModelVersion) -> tuple[Manifest, OnnxModel]:
    """The parts of a version the registry only hands out once it is ready."""
    assert mv.manifest is not None and mv.model is not None
    return mv.manifest, mv.model


def _phases(decoded: list[DecodedSeries]) -> np.ndarray | None:
    """One int64 phase per series for a cycle model (decoding gave every series one), else None."""
    if decoded[0].phase is None:
        return None
    return np.array([d.phase for d in decoded], np.int64)


def _timestamps(
    start: datetime | None, n_values: int, horizon: int, manifest: Manifest, field: str
) -> list[datetime] | None:
    if start is None:
        return None
    months = manifest.calendar
    if months is not None and not months.on_anchor(start):
        raise InvalidInput(
            f"{field} is {start.date().isoformat()}, but model {manifest.name} steps {manifest.frequency} "
            f"(every {months.months} month(s), stamped on {months.anchor}): start must be on {months.anchor}",
            field=field,
            limit=manifest.frequency,
        )
    try:
        return forecast_timestamps(start, n_values, horizon, manifest.frequency_seconds, months)
    except OverflowError:
        raise InvalidInput(
            f"{field}: the forecast would run past the last representable date (year 9999)", field=field
        ) from None
