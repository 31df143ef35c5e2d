"""`manifest.json` (docs/artifacts.md) parsed and checked into a typed, immutable object."""

from __future__ import annotations

import json
import math
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, PrivateAttr, ValidationError, model_validator

from app.artifacts.calendar import CalendarStep, calendar_step
from app.artifacts.contract import (
    ATTN_MIXED,
    ATTN_REM,
    ATTN_SOFTMAX,
    BATCH_AXIS,
    COVARIATE_INPUT,
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    GLOBAL_TRANSFORMER_KIND,
    INSPECT_FILE,
    LOCAL_INPUT,
    LOCAL_WEIGHT_INPUT,
    MODEL_FILE,
    PHASE_INPUT,
    window_scale,
)
from app.artifacts.covariates import CovariateLayout
from app.artifacts.cycle import step_microseconds
from app.artifacts.hybrid import LocalSpec
from rsa_core.zones import model_zone

HeadKind = Literal["regular", "cyclic_cos", "cyclic_sin", "softmax"]


class ManifestError(ValueError):
    """The manifest is missing, not JSON, or breaks the artifacts contract."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class TensorSpec(_Frozen):
    name: str
    dtype: str
    shape: tuple[int | str, ...]  # a string is a dynamic axis, e.g. "batch"


class CycleSpec(_Frozen):
    """A learned seasonal cycle (CycleNet style): the graphs take the phase of each window's first row."""

    period: int = Field(ge=2, strict=True)  # steps per cycle, e.g. 24 for a daily cycle of hourly data
    step_seconds: float = Field(gt=0, allow_inf_nan=False)


class HeadSpec(_Frozen):
    model_config = ConfigDict(frozen=True, extra="ignore", validate_by_name=True)

    head: int = Field(ge=0)
    kind: HeadKind
    dilation: PositiveInt = 1
    lambda_: float | None = Field(default=None, alias="lambda")
    gamma: float | None = None
    theta: float | None = None
    gate: float = Field(ge=0.0, le=1.0)


class LayerSpec(_Frozen):
    layer: int = Field(ge=0)
    gate_mode: str | None = None
    heads: tuple[HeadSpec, ...]


class FileSpec(_Frozen):
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")
    bytes: int = Field(ge=0)


class WindowScaleSpec(_Frozen):
    """How widths scale with each series' own spread (docs/intervals.md): per channel c,
    s_c = max(statistic of the window's last `rows` rows of c, floor[c]) ** power, on the raw scale."""

    statistic: Literal["std", "mean_abs_diff"]  # population std; mean |x_t − x_{t−lag}|
    rows: PositiveInt
    lag: PositiveInt = 1  # of mean_abs_diff: 1, or a global model's period (its seasonal-naive error)
    power: float = Field(default=1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    floor: tuple[float, ...] = Field(min_length=1)  # per channel, > 0: a flat window's spread

    @model_validator(mode="after")
    def _check(self) -> WindowScaleSpec:
        if not all(math.isfinite(f) and f > 0 for f in self.floor):
            raise ValueError(f"intervals.window_scale.floor must be finite and > 0, got {list(self.floor)}")
        return self

    def scale(self, windows: np.ndarray) -> np.ndarray:
        """s [S, 1, C] float32 for raw windows [S, L, C] (as the graph reads them): `window_scale` of the
        contract, the one definition the service answers with and the exporter calibrates with."""
        return window_scale(windows, self.statistic, self.rows, self.power, self.floor, self.lag)


class HistoryWidthsSpec(_Frozen):
    """Widths for windows that hold few values (a global model's short series), calibrated on held-out
    windows cut to as few (docs/intervals.md): a window whose observed values in its last
    `window_scale.rows` rows number values[k] to values[k + 1] − 1 takes widths[k]; values[−1] or more,
    the main `widths`; fewer than values[0] (none the service forecasts), widths[0]."""

    values: tuple[PositiveInt, ...] = Field(min_length=2)  # ascending edges, K + 1 of them
    widths: tuple[tuple[tuple[tuple[float, ...], ...], ...], ...]  # [K][levels][H][C]


class IntervalsSpec(_Frozen):
    """Split-conformal prediction intervals (docs/intervals.md): per calibrated level (percent), horizon
    step and channel, a width; the interval is forecast ± width, on the raw scale (`scale` none) or
    times each series' own spread (`scale` window, then widths are in units of that spread)."""

    method: Literal["split_conformal"]
    # The only kinds the service computes; a future exporter's other kinds are refused, not misread.
    residuals: Literal["absolute"]
    scale: Literal["none", "window"]
    window_scale: WindowScaleSpec | None = None  # exactly when scale is "window"
    levels: tuple[float, ...] = Field(min_length=1)
    widths: tuple[tuple[tuple[float, ...], ...], ...]  # [levels][H][C]
    calibration: dict[str, Any] | None = None
    # Per channel: never negative (declared or detected at training, export/nonnegative.py), so the
    # service clips that channel's bounds at 0. Absent: no channel is clipped.
    nonnegative: tuple[bool, ...] | None = None
    # Absent: every window takes `widths`. Only with `scale` window (a global model's).
    history: HistoryWidthsSpec | None = None
    # `widths` as float32 [K, H, C], built once at load: what every request's arithmetic uses; `history`'s
    # with them as the last block, [B + 1, K, H, C] (None without it).
    _array: np.ndarray = PrivateAttr()
    _by_history: np.ndarray | None = PrivateAttr(default=None)

    @property
    def array(self) -> np.ndarray:
        return self._array

    def widths_for(self, horizon: int, window: np.ndarray | None) -> np.ndarray:
        """The widths of a forecast of `horizon` steps (up to H; step k's width is step k's whatever the
        horizon): [K, h, C] on the raw scale (`scale` none), else [K, S, h, C] float32 scaled by each
        series' spread in its raw window [S, L, C], and taken from `history`'s block of the number of
        values the window holds (per channel, in its last `window_scale.rows` rows) where there is one.
        The one rule the service answers with and the exporter reports coverage with."""
        widths = self._array[:, :horizon]
        scale = self.window_scale
        if scale is None:
            return widths
        if window is None:
            raise ValueError("these intervals scale with each series' window: pass the windows forecast from")
        s = scale.scale(window)  # [S, 1, C]
        if self.history is None or self._by_history is None:
            return widths[:, None] * s[None]
        seen = (~np.isnan(np.asarray(window, dtype=np.float32)[:, -scale.rows :])).sum(axis=1)  # [S, C]
        block = np.searchsorted(np.asarray(self.history.values), seen, side="right") - 1
        block = np.maximum(block, 0)  # fewer than the first edge (none the service forecasts): the first
        channel = np.arange(seen.shape[1])[None, :]
        chosen = self._by_history[block, :, :horizon, channel]  # [S, C, K, h]; the last block is `widths`
        return np.transpose(chosen, (2, 0, 3, 1)) * s[None]

    @model_validator(mode="after")
    def _check(self) -> IntervalsSpec:
        levels = self.levels
        if not all(0 < level < 100 for level in levels):
            raise ValueError(f"intervals.levels must lie strictly between 0 and 100, got {list(levels)}")
        if any(b <= a for a, b in pairwise(levels)):
            raise ValueError(f"intervals.levels must be strictly increasing, got {list(levels)}")
        try:
            array = np.asarray(self.widths, dtype=np.float32)
        except ValueError:
            raise ValueError("intervals.widths must be [levels][horizon][channels] numbers") from None
        if array.ndim != 3 or array.shape[0] != len(levels):
            raise ValueError(f"intervals.widths must be [levels][horizon][channels], got shape {array.shape}")
        if not (np.isfinite(array).all() and (array >= 0).all()):
            raise ValueError("intervals.widths must be finite and >= 0")
        if (np.diff(array, axis=0) < 0).any():
            raise ValueError("intervals.widths must not narrow as the level grows")
        if (self.scale == "window") != (self.window_scale is not None):
            raise ValueError('intervals.window_scale must be given exactly when intervals.scale is "window"')
        array.setflags(write=False)
        self._array = array
        if self.history is not None:
            self._by_history = self._check_history(self.history, array)
        return self

    def _check_history(self, history: HistoryWidthsSpec, main: np.ndarray) -> np.ndarray:
        if self.window_scale is None:
            raise ValueError('intervals.history needs intervals.scale "window" (a global model\'s widths)')
        edges = history.values
        if any(b <= a for a, b in pairwise(edges)) or edges[-1] > self.window_scale.rows:
            raise ValueError(
                f"intervals.history.values must be strictly increasing, at most window_scale.rows = "
                f"{self.window_scale.rows}, got {list(edges)}"
            )
        try:
            blocks = np.asarray(history.widths, dtype=np.float32)
        except ValueError:
            raise ValueError("intervals.history.widths must be [K][levels][horizon][channels]") from None
        if blocks.shape != (len(edges) - 1, *main.shape):
            raise ValueError(
                f"intervals.history.widths must be [{len(edges) - 1}, {', '.join(map(str, main.shape))}] "
                f"(one block per pair of edges, each as widths), got shape {list(blocks.shape)}"
            )
        if not (np.isfinite(blocks).all() and (blocks >= 0).all()) or (np.diff(blocks, axis=1) < 0).any():
            raise ValueError("intervals.history.widths must be finite, >= 0, never narrowing with the level")
        stacked = np.concatenate([blocks, main[None]])
        stacked.setflags(write=False)
        return stacked


class TrainingSpec(_Frozen):
    """What a global model was trained on (export/global_models/search.py `training_record`): the series, the
    last timestamp of all, and each series' last by id (absent past 10,000 series)."""

    series: PositiveInt
    end: datetime
    ends: dict[str, datetime] | None = None

    def end_of(self, series_id: str | None) -> datetime:
        """The training data's end for a series: its own where the id was trained on, else the last of
        all (a series not known by id may still be one of them)."""
        if series_id is not None and self.ends is not None and series_id in self.ends:
            return self.ends[series_id]
        return self.end


class PanelSpec(_Frozen):
    """A global model (docs/artifacts.md, "Global models"): one channel, any series of the frequency.
    Histories of `min_history` to L values are fed with their missing start as NaN, which the graph
    masks; nothing is padded with invented values."""

    min_history: PositiveInt
    period: PositiveInt  # the seasonal cycle in steps the model was fitted with (1: none)
    missing: Literal["nan"] = "nan"  # how the window marks the steps before a series' start
    # Covariates (app/artifacts/covariates.py `CovariateLayout.to_json`): what the `covariates` input
    # holds and its training statistics; null or absent: the model reads the target alone.
    covariates: dict[str, Any] | None = None
    # A hybrid's local half (app/artifacts/hybrid.py `LocalSpec.to_json`); null: the read-out alone.
    local: dict[str, Any] | None = None
    # The training data's range (null: a version exported before it was recorded): a backtest's cutoffs
    # inside it are in-sample for the served weights.
    training: TrainingSpec | None = None
    _layout: CovariateLayout | None = PrivateAttr(default=None)
    _local: LocalSpec | None = PrivateAttr(default=None)

    @property
    def local_spec(self) -> LocalSpec | None:
        """The hybrid's local half, built once at load (None: the read-out alone)."""
        return self._local

    @property
    def layout(self) -> CovariateLayout | None:
        """The covariates' layout, built once at load (None without covariates)."""
        return self._layout

    @model_validator(mode="after")
    def _check(self) -> PanelSpec:
        if self.covariates is not None:
            try:
                layout = CovariateLayout.from_json(self.covariates)
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"panel.covariates is not a covariate layout: {e}") from None
            if len(layout.mean) != layout.width or len(layout.std) != layout.width:
                raise ValueError(f"panel.covariates needs {layout.width} means and stds")
            self._layout = layout
        if self.local is not None:
            if self.covariates is not None:
                raise ValueError("panel.local (a hybrid) reads the target alone: it cannot have covariates")
            try:
                self._local = LocalSpec.from_json(self.local)
            except ValueError as e:
                raise ValueError(f"panel.local: {e}") from None
        return self


class Manifest(_Frozen):
    name: str = Field(min_length=1)
    version: PositiveInt
    created: str | None = None
    # What the model is, in the exporter's words (docs/artifacts.md): `kind` a short name of the
    # architecture (e.g. rem_readout, rsa_transformer), `description` a sentence. Older manifests: null.
    kind: str | None = None
    description: str | None = None
    input_length: PositiveInt
    horizon: PositiveInt
    channels: tuple[str, ...] = Field(min_length=1)
    frequency: str | None = None
    frequency_seconds: float = Field(gt=0)
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    inspect_outputs: tuple[TensorSpec, ...] = ()
    layers: tuple[LayerSpec, ...] = ()
    architecture: dict[str, Any] | None = None
    opset: int | None = None
    verification: dict[str, Any] | None = None
    files: dict[str, FileSpec]
    metrics: dict[str, Any] | None = None  # null when the exporter had no training report
    dataset: dict[str, Any] | None = None
    cycle: CycleSpec | None = None  # null or absent: the graphs take `window` only
    intervals: IntervalsSpec | None = None  # null or absent: no prediction intervals (exported before them)
    # The IANA zone the training file's local times were read in (`--timezone`): naive served starts are
    # read in it, answers carry its offsets and the cycle follows its wall clock. Null or absent: UTC.
    timezone: str | None = None
    panel: PanelSpec | None = None  # null or absent: histories of at least L values, all observed
    # A global read-out's refit settings (app/artifacts/readout.py `ReadoutSpec`, read when a refit is
    # asked for): null or absent in versions exported before them, which cannot be refit.
    readout: dict[str, Any] | None = None

    @property
    def min_history(self) -> int:
        """The fewest values a series may have: L, or a global model's `panel.min_history`."""
        return self.panel.min_history if self.panel is not None else self.input_length

    @property
    def still_length(self) -> int | None:
        """The input length L of a global read-out without covariates, whose still windows (over their last
        L values) are forecast as their last cycle repeated (app/artifacts/readout `hold_still`) by its
        graph and by a hybrid's local half (app/artifacts/hybrid.py `LocalSpec.feed`); None otherwise."""
        if self.readout is None or self.panel is None or self.panel.covariates is not None:
            return None
        return int(self.readout["input_length"])

    @property
    def n_channels(self) -> int:
        return len(self.channels)

    @property
    def zone(self) -> ZoneInfo | None:
        """The model's time zone (None: UTC, as every model exported before zones)."""
        return None if self.timezone is None else ZoneInfo(self.timezone)

    @property
    def training_fill(self) -> str:
        """How the training file filled missing values (`--fill`, kept in `dataset`): none, linear, ffill
        or zero; none when the manifest does not say (exported before the option was recorded)."""
        fill = (self.dataset or {}).get("fill")
        return fill if isinstance(fill, str) else "none"

    @property
    def calendar(self) -> CalendarStep | None:
        """The calendar step (`frequency` of months, e.g. `3MS`), or None for a fixed step."""
        return calendar_step(self.frequency)

    @property
    def n_layers(self) -> int | None:
        """Encoder layers N, from the attn_rem shape [N, Hh, L, L] or [N, Hh, L], when the manifest has it."""
        rem = next((t for t in self.inspect_outputs if t.name == ATTN_REM), None)
        if rem is not None and rem.shape and isinstance(rem.shape[0], int):
            return rem.shape[0]
        return len(self.layers) or None

    @property
    def n_heads(self) -> int | None:
        """Heads per layer Hh, from the attn_rem shape [N, Hh, L, L] when the manifest states it."""
        rem = next((t for t in self.inspect_outputs if t.name == ATTN_REM), None)
        if rem is not None and len(rem.shape) > 1 and isinstance(rem.shape[1], int):
            return rem.shape[1]
        return max((len(spec.heads) for spec in self.layers), default=0) or None

    @property
    def last_query_only(self) -> bool:
        """The inspection graph gives the last query's row per head (attn_rem [N, Hh, L]) rather than
        L×L matrices: a model read out at its last step computes nothing else (docs/artifacts.md)."""
        rem = next((t for t in self.inspect_outputs if t.name == ATTN_REM), None)
        return rem is not None and len(rem.shape) == 3

    @property
    def attention_bytes_per_row(self) -> int | None:
        """Bytes of one series' attention matrices (attn_softmax without its batch axis): what a session
        call forms per row on top of its inputs, [C, N, Hh, L, L] or [C, N, Hh, L] for a last-step model.
        None when the manifest has no inspection outputs (then nothing bounds a call but its rows)."""
        softmax = next((t for t in self.inspect_outputs if t.name == ATTN_SOFTMAX), None)
        if softmax is None:
            return None
        dims = [d for d in softmax.shape[1:] if isinstance(d, int)]
        if len(dims) != len(softmax.shape) - 1:  # another dynamic axis: no size to read
            return None
        return math.prod(dims) * np.dtype(softmax.dtype).itemsize

    def head(self, layer: int, head: int) -> HeadSpec | None:
        """The manifest's entry for a head, or None when the manifest does not list it."""
        for spec in self.layers:
            if spec.layer == layer:
                return next((h for h in spec.heads if h.head == head), None)
        return None

    def layer(self, layer: int) -> LayerSpec | None:
        return next((spec for spec in self.layers if spec.layer == layer), None)

    @model_validator(mode="after")
    def _check_contract(self) -> Manifest:
        if len(set(self.channels)) != len(self.channels):
            raise ValueError(f"channels must be unique, got {list(self.channels)}")
        L, H, C = self.input_length, self.horizon, self.n_channels
        _expect(self.inputs, FORECAST_INPUT, (BATCH_AXIS, L, C), "inputs")
        _check_cycle(self)
        if self.timezone is not None:
            model_zone(self.timezone)  # ValueError: not an IANA name, or the host's own (`localtime`)
        _expect(self.outputs, FORECAST_OUTPUT, (BATCH_AXIS, H, C), "outputs")
        if self.inspect_outputs:
            _expect(self.inspect_outputs, FORECAST_OUTPUT, (BATCH_AXIS, H, C), "inspect_outputs")
            for name in (ATTN_SOFTMAX, ATTN_REM, ATTN_MIXED):
                if not any(t.name == name for t in self.inspect_outputs):
                    raise ValueError(f"inspect_outputs has no {name!r}")
        if self.intervals is not None and self.intervals.array.shape[1:] != (H, C):
            raise ValueError(
                f"intervals.widths is {list(self.intervals.array.shape)}, it must be [levels, {H}, {C}]"
            )
        flags = self.intervals.nonnegative if self.intervals is not None else None
        if flags is not None and len(flags) != C:
            raise ValueError(f"intervals.nonnegative has {len(flags)} flags for {C} channels")
        scale = self.intervals.window_scale if self.intervals is not None else None
        if scale is not None and (len(scale.floor) != C or scale.rows > L):
            raise ValueError(
                f"intervals.window_scale needs {C} floors (one per channel) and rows <= {L}, "
                f"got {len(scale.floor)} floors and rows {scale.rows}"
            )
        panel = self.panel
        local = panel.local_spec if panel is not None else None
        if local is not None and (local.length > L or local.horizon != H or local.period != panel.period):  # type: ignore[union-attr]
            raise ValueError(
                f"panel.local reads {local.length} values for horizon {local.horizon} at period "
                f"{local.period}: it needs length <= input_length {L}, horizon {H} and the panel's period"
            )
        # A global read-out has no attention graph (/v1 attention reads its model.onnx's constants); a
        # global transformer may have one (exported since issue 48): inspect.onnx, as a multichannel model.
        network = self.kind == GLOBAL_TRANSFORMER_KIND
        if panel is not None and (
            C != 1 or self.cycle or panel.min_history > L or (self.inspect_outputs and not network)
        ):
            raise ValueError(
                "panel (a global model) needs one channel, no cycle, no inspect_outputs (but a global "
                f"transformer's) and min_history <= input_length {L}"
            )
        inspectable = self.panel is None or bool(self.inspect_outputs)
        for required in (MODEL_FILE, INSPECT_FILE) if inspectable else (MODEL_FILE,):
            if required not in self.files:
                raise ValueError(f"files has no entry for {required!r}")
        return self


def _expect(specs: tuple[TensorSpec, ...], name: str, shape: tuple[str | int, ...], where: str) -> None:
    spec = next((t for t in specs if t.name == name), None)
    if spec is None:
        raise ValueError(f"{where} has no tensor named {name!r}")
    if spec.dtype != "float32":
        raise ValueError(f"{where}.{name} must be float32, got {spec.dtype}")
    if len(spec.shape) != len(shape) or any(
        isinstance(want, int) and got != want for got, want in zip(spec.shape, shape, strict=True)
    ):
        raise ValueError(f"{where}.{name} shape {list(spec.shape)} does not match {list(shape)}")
    if not isinstance(spec.shape[0], str):
        raise ValueError(f"{where}.{name} must have a dynamic batch axis, got {list(spec.shape)}")


def input_names(cycle: CycleSpec | None, covariates: bool = False, local: bool = False) -> tuple[str, ...]:
    """The graph inputs, in order, that a model with (or without) a cycle, covariates or a local half
    takes."""
    if covariates:
        return (FORECAST_INPUT, COVARIATE_INPUT)
    if local:
        return (FORECAST_INPUT, LOCAL_INPUT, LOCAL_WEIGHT_INPUT)
    return (FORECAST_INPUT,) if cycle is None else (FORECAST_INPUT, PHASE_INPUT)


def graph_inputs(manifest: Manifest) -> tuple[str, ...]:
    """The graph inputs, in order, of this manifest's model."""
    return input_names(manifest.cycle, has_covariates(manifest), has_local(manifest))


def has_covariates(manifest: Manifest) -> bool:
    return manifest.panel is not None and manifest.panel.layout is not None


def has_local(manifest: Manifest) -> bool:
    return manifest.panel is not None and manifest.panel.local_spec is not None


def _check_cycle(manifest: Manifest) -> None:
    """`cycle` and `inputs` agree, and the cycle advances one phase per row of the series."""
    cycle = manifest.cycle
    names = tuple(t.name for t in manifest.inputs)
    want = graph_inputs(manifest)
    if names != want:
        why = "cycle is null" if cycle is None else f"cycle has period {cycle.period}"
        if has_covariates(manifest):
            why = "panel.covariates is set"
        if has_local(manifest):
            why = "panel.local is set"
        raise ValueError(f"inputs are {list(names)} but {why}, so they must be {list(want)}")
    if cycle is None:
        return
    if manifest.calendar is not None:
        # A phase is counted in fixed steps since the epoch: months have no fixed length.
        raise ValueError(f"a cycle needs a fixed step; frequency {manifest.frequency} steps calendar months")
    phase = manifest.inputs[1]
    if phase.dtype != "int64":
        raise ValueError(f"inputs.{PHASE_INPUT} must be int64, got {phase.dtype}")
    if len(phase.shape) != 1 or not isinstance(phase.shape[0], str):
        raise ValueError(f"inputs.{PHASE_INPUT} shape {list(phase.shape)} must be ['batch'] (dynamic)")
    # Datetimes have microsecond resolution: both steps are compared, and used, to the microsecond.
    step_us = step_microseconds(cycle.step_seconds)
    if step_us < 1:
        raise ValueError(f"cycle.step_seconds {cycle.step_seconds} is below one microsecond")
    frequency = manifest.frequency_seconds
    if not math.isfinite(frequency) or step_us != step_microseconds(frequency):
        # The graph advances the phase by one per row, so a cycle step other than the row step
        # could not be aligned by one phase per window.
        raise ValueError(
            f"cycle.step_seconds {cycle.step_seconds} differs from frequency_seconds "
            f"{manifest.frequency_seconds}; the cycle must advance one phase per row"
        )


def parse_manifest(data: Any) -> Manifest:
    """Validate a decoded manifest; raises ManifestError naming every broken field."""
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise ManifestError(f"invalid manifest: {problems}") from exc


def load_manifest(path: Path) -> Manifest:
    """Read and validate `<version>/manifest.json`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ManifestError(f"{path} is missing") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path} is not readable JSON: {exc}") from exc
    return parse_manifest(data)
