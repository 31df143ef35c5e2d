"""OIP v2 operations on the inference service, for both transports (REST in `routes.py`,
gRPC in `grpc_server.py`): tensors in, tensors out. Knows the protocol's tensor names and rules, nothing
about HTTP or protobuf.

Tensors of a model version (docs/artifacts.md):
- input `window` FP32 [n, L, C]: n windows of the last L rows, channels in the manifest's order;
- input `phase` INT64 [n], only for a model with a seasonal cycle: each window's phase in [0, period);
  or, instead, `start` INT64 [n]: the Unix time (seconds, UTC) of each window's first row, from which the
  service computes the phase exactly as `/v1` does (docs/artifacts.md, "Phase");
- for a global model (the manifest's `panel`: one channel, any series), `window` FP32 [n, L, 1] or
  [n, L], each row right-aligned (its last value last), and optionally `lengths` INT64 [n]: how many of
  the row's last values the series has (from the model's min_history to L; absent: all L). The steps
  before a series' start hold any finite number, which is ignored: the service marks them missing (NaN)
  and the graph masks them, never reading them as values; a row's NaN (missing) are filled among the
  series' own values, and counted against their share, as /v1 fills a short history;
- for a global model with covariates (`panel.covariates`; docs/panels.md), named inputs: `future_<name>`
  FP32 [n, H] per future-known covariate, `past_<name>` FP32 [n, L] per past-only one (right-aligned as
  `window`; NaN: not observed), `static_<name>` [n] per static one (FP32 for a number, INT64 the index
  of the category in the model's `categories` for a categorical one), and `start` INT64 [n] (Unix
  seconds of each window's first row) when the model derives calendar covariates;
- output `forecast` FP32 [n, H, C], on the raw scale;
- outputs `forecast_lo_{level}` and `forecast_hi_{level}` FP32 [n, H, C] for each calibrated level of a
  version with prediction intervals (`forecast_lo_80`, `forecast_hi_80`, ...; the level as `/v1` writes it
  in `lo-80`): forecast − and + the manifest's widths (`app.inference.intervals`, as `/v1`'s `level`).
  One tensor per bound and level, rather than `forecast_lower`/`forecast_upper` chosen by a request
  parameter, so that model metadata lists every output a client may ask for and the stock Triton
  clients ask for them by name alone. Asking one of a version without intervals is a 400
  (no_calibrated_intervals); any other unknown output a 400 listing the version's outputs.

A request that names no output gets every output of the version, as the protocol specifies; name
`forecast` alone to keep the answer to the point forecast.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import numpy as np

from app.artifacts.cycle import unix_seconds_phase
from app.artifacts.manifest import Manifest
from app.core.errors import InvalidInput, NotServed, VersionNotFound
from app.core.numbers import decimal
from app.engine.catalog import VersionEntry
from app.inference.covariates import SeriesCovariates, covariate_rows
from app.inference.intervals import level_bounds, require_intervals
from app.inference.service import InferenceService
from app.inference.windows import YEARS, check_windows, fill_windows, require_finite, started_rows
from app.protocols.oip_v2.codec import InferResult, Tensor
from app.protocols.oip_v2.schemas import ModelMetadata, RepositoryModel, ServerMetadata, TensorMetadata
from rsa_core.steps import forecast_timestamps

SERVER_NAME = "rsa-forecast"
SERVER_VERSION = "0.1.0"
EXTENSIONS = ["binary_tensor_data"]
REPOSITORY_EXTENSION = "model_repository"  # the repository API, advertised when RSA_MODEL_CONTROL serves it
PLATFORM = "onnxruntime_onnx"
# Input values above which a request's windows and answer are prepared in a worker thread (73 windows of
# etth1-rsa's 512 x 7): below it the hop would cost more than the work.
BIG_INPUT = 1 << 18
FORECAST = "forecast"
LOWER, UPPER = "forecast_lo_", "forecast_hi_"  # + the level: the interval outputs' names
LENGTHS = "lengths"  # a global model's input: the values each window's series has


def output_names(manifest: Manifest) -> dict[str, tuple[float, int] | None]:
    """The version's outputs in metadata order: `forecast` (None), then per calibrated level its lower
    and upper bound, (level, -1) and (level, +1)."""
    names: dict[str, tuple[float, int] | None] = {FORECAST: None}
    if manifest.intervals is not None:
        for level in manifest.intervals.levels:
            names[f"{LOWER}{level:g}"] = (level, -1)
            names[f"{UPPER}{level:g}"] = (level, 1)
    return names


def parse_version(raw: str | None) -> int | None:
    """A path or message version: empty means the latest; otherwise a positive integer."""
    if raw is None or raw == "":
        return None
    version = decimal(raw)
    if version is None or version < 1:
        raise InvalidInput(f"model version must be a positive integer, got {raw!r}", field="version", limit=1)
    return version


class OipV2Handlers:
    def __init__(self, service: InferenceService, draining: Callable[[], bool]) -> None:
        self.service = service
        self.settings = service.settings
        self._draining = draining

    # -- health and metadata ---------------------------------------------------------------------
    def server_ready(self) -> bool:
        """Every configured version loaded, and not shutting down (as /readyz)."""
        return self.service.catalog.ready and not self._draining()

    def server_metadata(self) -> ServerMetadata:
        extensions = (
            [*EXTENSIONS, REPOSITORY_EXTENSION] if self.settings.model_control != "none" else EXTENSIONS
        )
        return ServerMetadata(name=SERVER_NAME, version=SERVER_VERSION, extensions=extensions)

    # -- the model repository extension (Triton's) --------------------------------------------------
    async def repository_index(self, ready_only: bool) -> list[RepositoryModel]:
        """Every version on disk or served (RSA_MODEL_CONTROL poll or explicit)."""
        self._require_control("the repository index", ("poll", "explicit"))
        return [
            RepositoryModel(
                name=e.name,
                version=None if e.version is None else str(e.version),
                state=e.state,
                reason=e.reason,
            )
            for e in await self.service.engine.index(ready_only)
        ]

    async def repository_load(self, name: str, parameters: Iterable[str] = ()) -> None:
        """Load or reload a model (RSA_MODEL_CONTROL=explicit)."""
        self._require_control("loading a model", ("explicit",))
        _check_parameters(parameters)
        await self.service.engine.load(name)

    async def repository_unload(self, name: str, parameters: Iterable[str] = ()) -> None:
        """Unload a model (RSA_MODEL_CONTROL=explicit)."""
        self._require_control("unloading a model", ("explicit",))
        _check_parameters(parameters)
        await self.service.engine.unload(name)

    def _require_control(self, what: str, modes: tuple[str, ...]) -> None:
        mode = self.settings.model_control
        if mode not in modes:
            raise NotServed(
                f"{what} is served only with RSA_MODEL_CONTROL={' or '.join(modes)}; this service runs "
                f"with {mode}",
                field="RSA_MODEL_CONTROL",
                limit=list(modes),
            )

    def model_ready(self, name: str, version: int | None) -> bool:
        served = self.service.model(name)
        if version is None:
            return served.latest is not None
        mv = served.versions.get(version)
        if mv is None:
            known = ", ".join(str(v) for v in sorted(served.versions)) or "none"
            raise VersionNotFound(
                f"model {name!r} has no version {version}; versions: {known}", field="version"
            )
        return mv.ready

    def model_metadata(self, name: str, version: int | None) -> ModelMetadata:
        entry = self.service.resolve(name, version)
        manifest = _manifest(entry)
        L, H, C = manifest.input_length, manifest.horizon, len(manifest.channels)
        inputs = [TensorMetadata(name="window", datatype="FP32", shape=[-1, L, C])]
        if manifest.panel is not None:
            inputs.append(TensorMetadata(name=LENGTHS, datatype="INT64", shape=[-1]))
        inputs += [TensorMetadata(name=n, datatype=d, shape=s) for n, d, s in _covariate_inputs(manifest)]
        if manifest.cycle is not None:
            inputs.append(TensorMetadata(name="phase", datatype="INT64", shape=[-1]))
        outputs = output_names(manifest)
        return ModelMetadata(
            name=entry.name,
            versions=[str(v) for v in sorted(self.service.model(name).versions)],
            platform=PLATFORM,
            inputs=inputs,
            outputs=[TensorMetadata(name=out, datatype="FP32", shape=[-1, H, C]) for out in outputs],
            parameters={
                "max_series_per_request": self.settings.max_series_per_request,
                "max_body_bytes": self.settings.max_body_bytes,
                "max_evaluations_in_flight": self.settings.max_evaluations_in_flight,
            },
        )

    # -- infer -----------------------------------------------------------------------------------
    async def infer(
        self,
        name: str,
        version: int | None,
        inputs: list[Tensor],
        outputs: list[str] | None,
        request_id: str | None,
    ) -> InferResult:
        entry = self.service.resolve(name, version)
        manifest = _manifest(entry)
        tensors = _by_name(inputs, manifest)
        # Hundreds of windows: filled, checked and bounded in a worker thread (about 40 ms for 720
        # windows of etth1-rsa, issue 46), so that the event loop serves other requests meanwhile.
        big = sum(t.array.size for t in inputs) > BIG_INPUT
        if big:
            window, filled = await asyncio.to_thread(self._window, tensors, manifest)
        else:
            window, filled = self._window(tensors, manifest)
        phases = _phases(tensors, manifest, len(window))
        covariates = _covariates(tensors, manifest, len(window))
        served = output_names(manifest)
        for i, output in enumerate(outputs or ()):
            if output in served:
                continue
            if output.startswith((LOWER, UPPER)):
                require_intervals(manifest.intervals, f"outputs[{i}] ({output})")
            raise InvalidInput(
                f"outputs[{i}]: {output!r} is not an output of model {entry.name} version {entry.version}; "
                f"its outputs are {list(served)}",
                field=f"outputs[{i}]",
                limit=list(served),
            )
        forecast = await self.service.forecast(
            entry, window, phases, latest=version is None, covariates=covariates
        )
        # in request order, each once; none named: all of them
        kinds = {out: served[out] for out in outputs} if outputs else served
        args = (manifest, kinds, forecast, window)
        answer = await asyncio.to_thread(_answer, *args) if big else _answer(*args)
        return InferResult(entry.name, str(entry.version), request_id, answer, filled)

    def _window(self, tensors: dict[str, Tensor], manifest: Manifest) -> tuple[np.ndarray, int]:
        L, C = manifest.input_length, len(manifest.channels)
        window = tensors.get("window")
        if window is None:
            raise InvalidInput(f"input 'window' (FP32 [n, {L}, {C}]) is missing", field="window")
        array = window.array
        if manifest.panel is not None and array.ndim == 2 and C == 1:
            array = array[:, :, None]  # a global model's [n, L]: one channel
        if window.datatype != "FP32":
            raise InvalidInput(
                f"input 'window' must be FP32, got {window.datatype}", field="window.datatype", limit="FP32"
            )
        if array.ndim != 3 or array.shape[1:] != (L, C) or array.shape[0] < 1:
            raise InvalidInput(
                f"input 'window' has shape {list(window.array.shape)}; model {manifest.name} takes "
                f"[n, {L}, {C}] (n >= 1 windows of its input length {L} and its {C} channels "
                f"{list(manifest.channels)})"
                + (f", or [n, {L}] (one channel)" if manifest.panel is not None and C == 1 else ""),
                field="window.shape",
                limit=[-1, L, C],
            )
        limit = self.settings.max_series_per_request
        if len(array) > limit:
            raise InvalidInput(
                f"input 'window' has {len(array)} windows; at most {limit} are accepted",
                field="window.shape",
                limit=limit,
            )
        # A global model's short row: its `lengths`, or the rows after its leading rows of NaN (the time
        # before the series began, as /v1 reads a history's leading nulls).
        given = _lengths(tensors.get(LENGTHS), manifest, len(array))
        lengths = started_rows(array, manifest, lambda n: f"window[{n}]", given)
        # NaN is a missing value: filled by the model's training rule, up to RSA_MAX_MISSING_SHARE; in a
        # global model's short row, only among the values the series has (as /v1 fills its history).
        array, counts = fill_windows(
            array, manifest, self.settings.max_missing_share, lambda n: f"window[{n}]", lengths
        )
        checked = array
        if lengths is not None:  # the steps before each start are the graph's to mask, whatever was sent
            array = _mask_start(array, lengths)
            checked = np.where(np.isnan(array), 0.0, array)  # every NaN left is before a start
        check_windows(checked, L, lambda n, t, c: f"window[{n}][{t}][{c}]")
        return array, int(counts.sum())


def _answer(
    manifest: Manifest,
    kinds: dict[str, tuple[float, int] | None],
    forecast: np.ndarray,
    window: np.ndarray,
) -> dict[str, np.ndarray]:
    """Each output asked (`kinds`: its level and side, None for the forecast) from the forecast and the
    manifest's intervals; every value finite, or the error names the first window that is not."""
    levels = list(dict.fromkeys(kind[0] for kind in kinds.values() if kind is not None))
    bounds = level_bounds(manifest.intervals, forecast, levels, "outputs", window=window) if levels else {}
    answer: dict[str, np.ndarray] = {}
    for out, kind in kinds.items():
        answer[out] = forecast if kind is None else bounds[kind[0]][0 if kind[1] < 0 else 1]
    require_finite(list(answer.values()), lambda row: f"window[{row}]")
    return answer


def _mask_start(array: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A global model's windows with the steps before each series' start (`lengths`) set to NaN, which
    its graph masks."""
    L = array.shape[1]
    out = np.array(array, dtype=np.float32)  # a copy: a binary tensor's array is read-only
    out[np.arange(L)[None, :] < (L - lengths)[:, None]] = np.nan
    return out


def _check_one_per_window(tensor: Tensor, n: int) -> None:
    """An INT64 input of one value per window ([n]: `lengths`, `phase`, `start`)."""
    if tensor.datatype != "INT64" or tensor.array.shape != (n,):
        raise InvalidInput(
            f"input {tensor.name!r} must be INT64 of shape [{n}] (one per window), got {tensor.datatype} "
            f"{list(tensor.array.shape)}",
            field=f"{tensor.name}.shape",
            limit=[n],
        )


def _lengths(lengths: Tensor | None, manifest: Manifest, n: int) -> np.ndarray | None:
    """A global model's `lengths` [n], checked: every length between its min_history and L; None when
    not given (every row full) or for any other model (which takes no `lengths`)."""
    if manifest.panel is None or lengths is None:
        return None
    L, least = manifest.input_length, manifest.panel.min_history
    _check_one_per_window(lengths, n)
    bad = (lengths.array < least) | (lengths.array > L)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidInput(
            f"{LENGTHS}[{i}] = {int(lengths.array[i])}: model {manifest.name} needs at least {least} values "
            f"(its min_history) and reads at most {L} (its input length)",
            field=f"{LENGTHS}[{i}]",
            limit=least,
        )
    return np.asarray(lengths.array, np.int64)


def _check_parameters(names: Iterable[str]) -> None:
    """Of Triton's repository parameters, `unload_dependents` is taken (nothing depends on a forecaster);
    its `config` and file overrides are refused: a version comes from its folder in the repository."""
    unknown = sorted(set(names) - {"unload_dependents"})
    if unknown:
        raise InvalidInput(
            f"parameters {unknown} are not served: a model loads from its folder in the repository",
            field=f"parameters.{unknown[0]}",
        )


def _manifest(entry: VersionEntry) -> Manifest:
    assert entry.manifest is not None  # the catalog resolves ready versions only
    return entry.manifest


def _by_name(inputs: list[Tensor], manifest: Manifest) -> dict[str, Tensor]:
    allowed = ["window", "phase", "start"] if manifest.cycle is not None else ["window"]
    if manifest.panel is not None:
        allowed = ["window", LENGTHS, *(name for name, _, _ in _covariate_inputs(manifest))]
    tensors: dict[str, Tensor] = {}
    for i, tensor in enumerate(inputs):
        if tensor.name not in allowed:
            raise InvalidInput(
                f"inputs[{i}]: {tensor.name!r} is not an input of model {manifest.name}; it takes {allowed}"
                + ("" if manifest.cycle is not None else " (it has no seasonal cycle, so no phase)"),
                field=f"inputs[{i}].name",
                limit=allowed,
            )
        if tensor.name in tensors:
            raise InvalidInput(f"inputs[{i}]: {tensor.name!r} is given twice", field=f"inputs[{i}].name")
        tensors[tensor.name] = tensor
    return tensors


def _covariate_inputs(manifest: Manifest) -> list[tuple[str, str, list[int]]]:
    """(name, datatype, shape) of a covariate model's extra inputs; none for any other model."""
    layout = manifest.panel.layout if manifest.panel is not None else None
    if layout is None:
        return []
    L, H = layout.input_length, layout.horizon
    out = [(f"future_{n}", "FP32", [-1, H]) for n in layout.future]
    out += [(f"past_{n}", "FP32", [-1, L]) for n in layout.past]
    out += [(f"static_{s.name}", "FP32" if s.categories is None else "INT64", [-1]) for s in layout.static]
    if layout.calendar:
        out.append(("start", "INT64", [-1]))
    return out


def _covariates(tensors: dict[str, Tensor], manifest: Manifest, n: int) -> np.ndarray | None:
    """The `covariates` graph input from the named covariate tensors, each checked with its name."""
    layout = manifest.panel.layout if manifest.panel is not None else None
    if layout is None:
        return None
    arrays: dict[str, np.ndarray] = {}
    for name, datatype, shape in _covariate_inputs(manifest):
        tensor = tensors.get(name)
        want = [n, *shape[1:]]
        if tensor is None:
            raise InvalidInput(
                f"input {name!r} ({datatype} {want}) is missing: model {manifest.name} reads covariates "
                f"{[c['name'] for c in layout.describe()]}",
                field=name,
            )
        if tensor.datatype != datatype or list(tensor.array.shape) != want:
            raise InvalidInput(
                f"input {name!r} must be {datatype} of shape {want}, got {tensor.datatype} "
                f"{list(tensor.array.shape)}",
                field=f"{name}.shape",
                limit=want,
            )
        arrays[name] = tensor.array
    lengths = tensors.get(LENGTHS)
    L, H = layout.input_length, layout.horizon
    items = []
    for i in range(n):
        observed = L if lengths is None else int(lengths.array[i])
        static: dict[str, object] = {}
        for s in layout.static:
            v = arrays[f"static_{s.name}"][i]
            if s.categories is None:
                static[s.name] = float(v)
            else:
                k = int(v)
                if not 0 <= k < len(s.categories):
                    raise InvalidInput(
                        f"static_{s.name}[{i}] = {k}: must index one of the categories {list(s.categories)}",
                        field=f"static_{s.name}[{i}]",
                        limit=len(s.categories) - 1,
                    )
                static[s.name] = s.categories[k]
        stamps = None
        if layout.calendar:
            first = datetime.fromtimestamp(int(arrays["start"][i]), UTC)
            stamps = forecast_timestamps(
                first, L, H, manifest.frequency_seconds, manifest.calendar, manifest.zone
            )
        items.append(
            SeriesCovariates(
                field=f"window[{i}]",
                n_values=observed,
                future={f: arrays[f"future_{f}"][i].tolist() for f in layout.future},
                past={
                    p: [None if np.isnan(x) else x for x in arrays[f"past_{p}"][i][L - observed :].tolist()]
                    for p in layout.past
                },
                static=static,
                horizon_stamps=stamps,
            )
        )
    return covariate_rows(manifest, layout, items)


def _phases(tensors: dict[str, Tensor], manifest: Manifest, n: int) -> np.ndarray | None:
    """Each window's phase for a cycle model, from `phase` or from `start`; None for a model without."""
    cycle = manifest.cycle
    if cycle is None:
        return None
    given = [t for t in (tensors.get("phase"), tensors.get("start")) if t is not None]
    if len(given) != 1:
        raise InvalidInput(
            f"model {manifest.name} has a seasonal cycle of period {cycle.period}: give either input 'phase' "
            "(INT64 [n], each window's phase) or 'start' (INT64 [n], Unix seconds of each window's first "
            "row), exactly one of them",
            field="phase",
        )
    tensor = given[0]
    _check_one_per_window(tensor, n)
    if tensor.name == "start":
        phases = []
        for i, s in enumerate(tensor.array):
            try:
                phases.append(unix_seconds_phase(int(s), cycle.period, cycle.step_seconds, manifest.timezone))
            except OverflowError:  # a zoned model reads the instant on its clock, which has years 1..9999
                raise InvalidInput(
                    f"start[{i}] = {int(s)} Unix seconds is not a date in the model's zone "
                    f"{manifest.timezone}: times must lie within years 1 to 9999 ({YEARS})",
                    field=f"start[{i}]",
                    limit=YEARS,
                ) from None
        return np.array(phases, np.int64)
    bad = (tensor.array < 0) | (tensor.array >= cycle.period)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidInput(
            f"phase[{i}] = {int(tensor.array[i])} is outside the cycle's range 0..{cycle.period - 1}",
            field=f"phase[{i}]",
            limit=cycle.period - 1,
        )
    return tensor.array
