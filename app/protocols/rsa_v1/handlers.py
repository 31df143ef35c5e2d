"""The `/v1` API's handlers: request schemas -> arrays (the codec) -> the inference service -> response
schemas. Knows this protocol's schemas and the domain errors, nothing about HTTP."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar, get_args

import numpy as np

from app.artifacts.contract import ATTN_SOFTMAX, GLOBAL_TRANSFORMER_KIND, MODEL_FILE
from app.artifacts.manifest import Manifest
from app.artifacts.readout import window_scales
from app.artifacts.repository import model_folder
from app.core.errors import InvalidInput, ModelNotReady
from app.engine.api import VersionStats
from app.engine.catalog import ModelEntry, VersionEntry
from app.engine.types import InspectResult
from app.inference.covariates import SeriesCovariates, covariate_rows, refuse_covariates
from app.inference.explain import (
    FD_STEP,
    explain_hybrid,
    explain_readout,
    finite_difference_rows,
    load_readout_graph,
    sensitivity,
)
from app.inference.intervals import (
    available_quantiles,
    check_levels,
    check_quantiles,
    level_bounds,
    quantile_bounds,
)
from app.inference.service import InferenceService
from app.inference.windows import check_calendar_anchor, check_horizon, check_series_count, require_finite
from app.protocols.rsa_v1.codec import (
    DecodedSeries,
    decode_series,
    forecast_timestamps,
    resolve_channel,
)
from app.protocols.rsa_v1.plotting import render_attention_png
from app.protocols.rsa_v1.schemas import (
    AttentionRequest,
    AttentionResponse,
    BatchingStats,
    CovariateInfo,
    CycleInfo,
    FileInfo,
    ForecastRequest,
    IntervalsInfo,
    LayerInfo,
    MatrixName,
    ModelInfo,
    ModelList,
    PanelInfo,
    SeriesInput,
    VersionInfo,
)
from app.protocols.rsa_v1.wire import ForecastArgs, ForecastResult, SeriesArrays, encode_attention

T = TypeVar("T")
_MATRIX_FIELDS: tuple[MatrixName, ...] = get_args(MatrixName)  # softmax, rem, mixed: MatrixSet's field order
# AttentionResponse's global-model fields, null unless the answer has them (its JSON holds every field).
_NO_GLOBAL_PARTS: dict[str, Any] = {"readout": None, "hybrid": None, "sensitivity": None}


class V1Handlers:
    """The `/v1` API's operations: decode the request, call the inference service, encode the answer."""

    def __init__(self, service: InferenceService) -> None:
        self.service = service
        self.settings = service.settings

    def decode(self, series: SeriesInput | SeriesArrays, manifest: Manifest, field: str) -> DecodedSeries:
        """A request series decoded for `manifest` within this server's bounds on its history's length
        and missing share; its errors name `field`."""
        return decode_series(
            series, manifest, field, self.settings.max_history_length, self.settings.max_missing_share
        )

    # -- forecast --------------------------------------------------------------------------------
    async def forecast(
        self, name: str, version: int | None, request: ForecastRequest | ForecastArgs
    ) -> ForecastResult:
        entry = self.service.resolve(name, version)
        manifest = _manifest(entry)
        check_series_count(len(request.series), self.settings.max_series_per_request, "series", "items")
        horizon = check_horizon(request.horizon, manifest, fit_hint=True)
        _check_interval_request(manifest, request)  # before the session call: a bad level costs no run
        decoded = [self.decode(s, manifest, f"series[{i}]") for i, s in enumerate(request.series)]
        # Timestamps before the session call: a start too close to the calendar's end is the
        # client's mistake, and must not cost a model run first.
        stamps = [
            _timestamps(d.start, d.n_values, horizon, manifest, f"series[{i}].start")
            for i, d in enumerate(decoded)
        ]
        windows = decoded[0].window[None] if len(decoded) == 1 else np.stack([d.window for d in decoded])
        covariates = _covariates(manifest, request, decoded)
        outputs = await self.service.forecast(
            entry, windows, _phases(decoded), latest=version is None, covariates=covariates
        )
        outputs = outputs[:, :horizon]  # [S, h, C]
        bands = _bands(manifest, outputs, request, windows)
        require_finite([outputs, *bands.values()], lambda i: f"series[{i}]")
        return ForecastResult(
            model=entry.name,
            version=entry.version,
            provider=entry.provider or "",
            channels=list(manifest.channels),
            ids=[d.id for d in decoded],
            outputs=outputs,
            timestamps=stamps,
            bands=bands,
            filled=[d.filled for d in decoded],
            local_models=_local_models(manifest, windows),
        )

    # -- attention -------------------------------------------------------------------------------
    async def attention(self, name: str, version: int | None, request: AttentionRequest) -> bytes:
        """`AttentionResponse`'s JSON bytes, encoded inside the inspection slot and deadline."""
        return await self._attention(name, version, request, encode_attention)

    async def attention_png(self, name: str, version: int | None, request: AttentionRequest) -> bytes:
        """The attention figure as PNG bytes, rendered inside the inspection slot and deadline. The figure
        reads the schema's objects, made from the same JSON (one builder for both answers; matplotlib's
        rendering costs far more than that validation)."""
        matrices = list(dict.fromkeys(request.matrices))

        def render(document: dict[str, Any]) -> bytes:
            response = AttentionResponse.model_validate_json(encode_attention(document))
            return render_attention_png(response, matrices)

        return await self._attention(name, version, request, render)

    async def _attention(
        self,
        name: str,
        version: int | None,
        request: AttentionRequest,
        finish: Callable[[dict[str, Any]], T],
    ) -> T:
        entry = self.service.resolve(name, version)
        manifest = _manifest(entry)
        if manifest.panel is not None and not manifest.inspect_outputs:
            return await self._explain_global(entry, manifest, request, finish)
        channel = resolve_channel(request.channel, manifest)
        decoded = self.decode(request.series, manifest, "series")
        if manifest.n_layers is not None and request.layers is not None:
            _check_layers(request.layers, manifest.n_layers)  # before paying for the session call
        wanted = list(dict.fromkeys(request.matrices))
        self._check_attention_size(manifest, request, len(wanted))
        covariates = None  # a global transformer's inspection graph reads its covariates, as its forecast
        if manifest.panel is not None:
            one = ForecastRequest.model_construct(series=[request.series])
            covariates = _covariates(manifest, one, [decoded], lambda _: "series")

        def encode(result: InspectResult) -> T:
            require_finite([result.mixed[:, channel], result.softmax[:, channel]], lambda _: "series")
            n_layers = int(result.rem.shape[0])
            layers = request.layers if request.layers is not None else list(range(n_layers))
            _check_layers(layers, n_layers)
            # C-ordered float32, as orjson writes numpy arrays (the session's outputs already are).
            parts: tuple[tuple[MatrixName, np.ndarray], ...] = (
                ("softmax", result.softmax[0, channel]),  # [N, Hh, L, L], or [N, Hh, L] (last query)
                ("rem", result.rem),
                ("mixed", result.mixed[0, channel]),
            )
            arrays: dict[MatrixName, np.ndarray] = {
                key: np.ascontiguousarray(array, dtype=np.float32) for key, array in parts
            }
            out_layers = [
                _layer_attention(manifest, layer, arrays, wanted, request.average_heads) for layer in layers
            ]
            # `AttentionResponse`'s fields, in its order, with arrays where it has matrices.
            return finish(
                {
                    "model": entry.name,
                    "version": entry.version,
                    "provider": entry.provider or "",
                    "channel": {"index": channel, "name": manifest.channels[channel]},
                    "input_length": manifest.input_length,
                    "query": "last" if result.rem.ndim == 3 else "all",
                    "layers": out_layers,
                    **_NO_GLOBAL_PARTS,
                }
            )

        return await self.service.inspect(entry, decoded.window[None], _phases([decoded]), encode, covariates)

    async def _explain_global(
        self,
        entry: VersionEntry,
        manifest: Manifest,
        request: AttentionRequest,
        finish: Callable[[dict[str, Any]], T],
    ) -> T:
        """A global model's answer (app/inference/explain.py): a read-out's (or a hybrid's read-out's)
        forecast term by term, a hybrid's members, or a network's lag sensitivity through its graph."""
        channel = resolve_channel(request.channel, manifest)
        if request.layers is not None:
            raise InvalidInput(
                f"model {entry.name} is a global model: it has no layers; leave `layers` out", field="layers"
            )
        decoded = self.decode(request.series, manifest, "series")
        one = ForecastRequest.model_construct(series=[request.series])
        covariates = _covariates(manifest, one, [decoded], lambda _: "series")  # [1, D] or None
        L, H = manifest.input_length, manifest.horizon
        network = manifest.kind == GLOBAL_TRANSFORMER_KIND
        # The answer's numbers: [L][H] weights and contributions (the read-out) or weights (a network),
        # H per kernel, covariate and member at most L + D of them.
        width = 0 if covariates is None else covariates.shape[1]
        values = (1 if network else 2) * L * H + (L + width + 8) * H + L
        limit = self.settings.max_attention_values
        if values > limit:
            raise InvalidInput(
                f"the answer would hold about {values} numbers (L = {L} lags x H = {H} steps), over the "
                f"limit of {limit} (RSA_MAX_ATTENTION_VALUES)",
                field="series",
                limit=limit,
            )
        window = decoded.window[:, 0]  # [W] float32, NaN before a short series' start
        base = {
            "model": entry.name,
            "version": entry.version,
            "provider": entry.provider or "",
            "channel": {"index": channel, "name": manifest.channels[channel]},
            "input_length": L,
            "query": "last",
            "layers": [],
            **_NO_GLOBAL_PARTS,
        }
        if network:
            period = manifest.panel.period if manifest.panel is not None else 1
            x = window.astype(np.float64)[None]
            m = (~np.isnan(x)).astype(np.float64)
            scale = float(window_scales(np.where(m > 0, x, 0.0), m, period)[0])
            rows = finite_difference_rows(window, scale)
            cov_rows = None if covariates is None else np.repeat(covariates, len(rows), 0)

            def sensitive(outputs: np.ndarray | None) -> T:
                assert outputs is not None
                out = outputs[:, :, 0]
                require_finite([out], lambda _: "series")
                weights = sensitivity(out, window, scale)
                normalised = np.where(np.isnan(window), 0.0, window.astype(np.float64)) / scale
                answer = {
                    "method": "finite_difference",
                    "step": FD_STEP,
                    "scale": scale,
                    "values": normalised[-L:],
                    "lag_weights": weights[-L:],
                    "forecast": out[0].astype(np.float64),
                }
                return finish({**base, "sensitivity": answer})

            return await self.service.explain(entry, sensitive, rows[:, :, None], cov_rows)

        path = model_folder(self.settings.model_repository, entry.name) / str(entry.version) / MODEL_FILE

        def explain(_: np.ndarray | None) -> T:
            try:
                graph = load_readout_graph(path)
            except (OSError, ValueError) as e:
                raise ModelNotReady(f"model {entry.name} version {entry.version}: {e}") from None
            readout = explain_readout(manifest, graph, window, None if covariates is None else covariates[0])
            require_finite([readout["forecast"]], lambda _: "series")
            hybrid = explain_hybrid(manifest, window, readout["forecast"])
            return finish({**base, "readout": readout, "hybrid": hybrid})

        return await self.service.explain(entry, explain)

    def _check_attention_size(self, manifest: Manifest, request: AttentionRequest, n_matrices: int) -> None:
        """The answer's size, known from the manifest, against RSA_MAX_ATTENTION_VALUES."""
        n_layers, n_heads = manifest.n_layers, manifest.n_heads
        if n_layers is None or n_heads is None:
            return  # an older manifest: the layer check after the session call still applies
        layers = len(request.layers) if request.layers is not None else n_layers
        per_layer = 1 if request.average_heads else n_heads
        L = _tokens(manifest)
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
    async def models(self) -> ModelList:
        return ModelList(models=[await self._describe(served) for served in self.service.models()])

    async def model(self, name: str) -> ModelInfo:
        return await self._describe(self.service.model(name))

    async def _describe(self, served: ModelEntry) -> ModelInfo:
        stats = {v.version: await self.service.stats(v) for v in served.sorted() if v.ready}
        return describe_model(served, stats)


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


def describe_version(entry: VersionEntry, stats: VersionStats | None) -> VersionInfo:
    info = VersionInfo(version=entry.version, state=entry.state, error=entry.error, provider=entry.provider)
    if stats is not None:
        info.batching = BatchingStats(
            max_series_per_call=stats.max_series_per_call,
            session_calls=stats.session_calls,
            rows=stats.rows,
            failed_calls=stats.failed_calls,
            rejected_requests=stats.rejected_requests,
            expired_requests=stats.expired_requests,
            dropped_requests=stats.dropped_requests,
        )
    m = entry.manifest
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
                "timezone": m.timezone,
                "cycle": None
                if m.cycle is None
                else CycleInfo(period=m.cycle.period, step_seconds=m.cycle.step_seconds),
                "panel": None
                if m.panel is None
                else PanelInfo(
                    min_history=m.panel.min_history,
                    period=m.panel.period,
                    covariates=[CovariateInfo(**c) for c in m.panel.layout.describe()]
                    if m.panel.layout is not None
                    else [],
                ),
                "intervals": None
                if m.intervals is None
                else IntervalsInfo(
                    method=m.intervals.method,
                    levels=list(m.intervals.levels),
                    quantiles=[round(q, 6) for q in available_quantiles(m.intervals)],
                    calibration=m.intervals.calibration,
                ),
                # the manifest's layers and heads, field for field (LayerInfo mirrors LayerSpec)
                "layers": [LayerInfo.model_validate(spec, from_attributes=True) for spec in m.layers],
                "architecture": m.architecture,
                "metrics": m.metrics,
                "dataset": m.dataset,
                "verification": m.verification,
                "opset": m.opset,
                "files": {k: FileInfo(sha256=f.sha256, bytes=f.bytes) for k, f in m.files.items()},
            }
        )
    return info


def describe_model(served: ModelEntry, stats: dict[int, VersionStats | None]) -> ModelInfo:
    latest = served.latest
    return ModelInfo(
        name=served.name,
        ready=served.ready,
        latest_version=latest.version if latest else None,
        error=served.error,
        versions=[describe_version(v, stats.get(v.version)) for v in served.sorted()],
    )


def _matrix_set(
    arrays: dict[MatrixName, np.ndarray], wanted: list[MatrixName], select: tuple[int, ...]
) -> dict[str, np.ndarray | None]:
    """`MatrixSet`'s fields, in its order: the wanted matrices' arrays, null for the others."""
    return {m: arrays[m][select] if m in wanted else None for m in _MATRIX_FIELDS}


def _layer_attention(
    manifest: Manifest,
    layer: int,
    arrays: dict[MatrixName, np.ndarray],
    wanted: list[MatrixName],
    average: bool,
) -> dict[str, Any]:
    """`LayerAttention` as JSON-ready objects (`HeadAttention`'s fields in its order, `lambda` by its
    alias), the matrices as arrays for orjson; tests/app/attention_json.py checks that the answer
    parses to what the schema's pydantic encoder wrote."""
    n_heads = arrays["rem"].shape[1]
    spec = manifest.layer(layer)
    heads = []
    for h in range(n_heads):
        head = manifest.head(layer, h)
        heads.append(
            {
                "head": h,
                "kind": head.kind if head else None,
                "dilation": head.dilation if head else None,
                "lambda": head.lambda_ if head else None,
                "gamma": head.gamma if head else None,
                "theta": head.theta if head else None,
                "gate": head.gate if head else None,
                "matrices": None if average else _matrix_set(arrays, wanted, (layer, h)),
            }
        )
    mean = None
    if average:
        means = {m: arrays[m][layer].mean(axis=0) for m in wanted}
        mean = _matrix_set(means, wanted, ())
    return {
        "layer": layer,
        "gate_mode": spec.gate_mode if spec else None,
        "heads": heads,
        "mean": mean,
    }


def _tokens(manifest: Manifest) -> int:
    """The attention's length T: L, or a global transformer's L + H horizon tokens (its attn_softmax's
    last axis, when the manifest states it)."""
    softmax = next((t for t in manifest.inspect_outputs if t.name == ATTN_SOFTMAX), None)
    last = softmax.shape[-1] if softmax is not None and softmax.shape else None
    return last if isinstance(last, int) else manifest.input_length


def _manifest(entry: VersionEntry) -> Manifest:
    """A ready version's manifest (the catalog resolves ready versions only)."""
    assert entry.manifest is not None
    return entry.manifest


def _local_models(manifest: Manifest, windows: np.ndarray) -> list[str | None]:
    """Per series of a hybrid, why it got the read-out alone (None: the local models took their share);
    empty for any other model."""
    local = manifest.panel.local_spec if manifest.panel is not None else None
    return [] if local is None else local.skipped(windows)


def _phases(decoded: list[DecodedSeries]) -> np.ndarray | None:
    """One int64 phase per series for a cycle model (decoding gave every series one), else None."""
    if decoded[0].phase is None:
        return None
    return np.array([d.phase for d in decoded], np.int64)


def _covariates(
    manifest: Manifest,
    request: ForecastRequest | ForecastArgs,
    decoded: list[DecodedSeries],
    field_of: Callable[[int], str] = lambda i: f"series[{i}]",
) -> np.ndarray | None:
    """The `covariates` input [S, D] of a covariate model (its calendar read at the model's H horizon
    steps after each series' last value), or None; a model without them refuses a series sending some.
    `field_of(i)` names series i in an error (the attention route's one series: `series`)."""
    layout = manifest.panel.layout if manifest.panel is not None else None
    items = []
    for i, (s, d) in enumerate(zip(request.series, decoded, strict=True)):
        stamps = None
        if layout is not None and layout.calendar and d.start is not None:
            stamps = _timestamps(d.start, d.n_values, manifest.horizon, manifest, f"{field_of(i)}.start")
        items.append(
            SeriesCovariates(
                field=field_of(i),
                n_values=d.n_values,
                future=getattr(s, "future", None),
                past=getattr(s, "past", None),
                static=getattr(s, "static", None),
                horizon_stamps=stamps,
            )
        )
    if layout is None:
        for item in items:
            refuse_covariates(manifest, item)
        return None
    return covariate_rows(manifest, layout, items)


def _timestamps(
    start: datetime | None, n_values: int, horizon: int, manifest: Manifest, field: str
) -> list[datetime] | None:
    if start is None:
        return None
    check_calendar_anchor(manifest, start, field)
    try:
        return forecast_timestamps(
            start, n_values, horizon, manifest.frequency_seconds, manifest.calendar, manifest.zone
        )
    except OverflowError:
        raise InvalidInput(
            f"{field}: the forecast would run past the last representable date (year 9999)", field=field
        ) from None
