"""Split-conformal prediction intervals per horizon step and channel, from an exported ONNX model.

    python -m export.conformal model_repository/etth1-rsa/2   # calibrate, publish version 3, evaluate
    python -m export.conformal model_repository/etth1-rsa/3   # has intervals: evaluate only

Calibration runs the version's `model.onnx` (ONNX Runtime, CPU) over every window of the validation
split of the data set its manifest names, read the way training read it, and keeps, per level, horizon
step and channel, the conformal quantile of the scores (order statistic ceil((n + 1)·level) of n
windows, the finite-sample correction): the absolute residuals |y - forecast| on the raw scale, or
those divided by each window's own spread. Which (`METHODS`) is chosen on splits of the validation
split itself (`select_method`: rolling origins and halves, never the test split). The service answers
forecast ± that width (× the request's spread): constants in the manifest's `intervals` block, no
extra inference. A version
without intervals is published again as a new version: the same graphs byte for byte, the manifest
with the block. docs/intervals.md has the method, the choices we measured and the limits.

Evaluation (the report under results/intervals/, read by export/results.py): coverage, mean width and
the interval (Winkler) score per level on every test window, per horizon step and per request horizon
(the service slices the widths to the horizon asked), beside every candidate method calibrated on the
whole validation split, signed residuals and a naive baseline pooled over the steps.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import typer

from app.artifacts.conformal import conformal_quantile
from app.artifacts.contract import (
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    INSPECT_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    PHASE_INPUT,
    window_scale,
)
from export.calibration_size import calibration_plan
from export.data import ETT_DIR, DataError, Dataset, ReadOptions, Split, load_dataset
from export.paths import portable, resolve
from export.publish import publish_version
from export.reports import IntervalEvaluation, build, read_report
from export.reports import write_report as save_report

__all__ = [
    "DEFAULT_LEVELS",
    "METHODS",
    "Method",
    "SplitForecasts",
    "calibrate",
    "conformal_quantile",
    "evaluate",
    "fit_method",
    "for_checkpoint",
    "intervals_block",
    "publish",
    "select_method",
    "split_forecasts",
]

log = logging.getLogger(__name__)

# Percent. Their quantiles (TimeGPT's mapping, docs/intervals.md) are 0.005 ... 0.995.
DEFAULT_LEVELS: tuple[float, ...] = (50, 80, 90, 95, 99)
CALIBRATION_SPLIT = "val"
# Rows per ONNX Runtime call: a few MB of input, far below what a session call costs to start; fewer
# where one attention matrix of the call (rows × channels × heads × queries × L float32, the graph holds
# a few at once) would pass _ATTENTION_BYTES: 256 rows of a full-attention L = 720 model are 14.5 GB per
# matrix, and the exporter was killed for memory on this 24 GB machine.
_BATCH = 256
_ATTENTION_BYTES = 256 * 2**20
# The window-scaled variant divides by each window's own spread; a flat window (ETTh1's LULL and LUFL
# hold a few) would divide by zero, so the spread has a floor: this share of the channel's median
# spread over the calibration windows. Fixed before looking at the test split.
_SCALE_FLOOR = 0.1


@dataclass(frozen=True)
class SplitForecasts:
    """Every window of a split on the raw scale: inputs [N, L, C] (float32, what the service feeds),
    targets [N, H, C] (float64, the file's values) and the model's forecasts [N, H, C] (float32)."""

    windows: np.ndarray
    targets: np.ndarray
    forecasts: np.ndarray

    @property
    def residuals(self) -> np.ndarray:
        return self.targets - self.forecasts


def _session(model_path: Path) -> Any:  # an ort.InferenceSession (onnxruntime ships no types)
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1  # the machine is shared; calibration is a few seconds either way
    return ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])


def _raw_rows(ds: Dataset, split: Split) -> np.ndarray:
    """The split's rows as the file holds them (float64), channels in the model's order."""
    start, end = ds.borders[split.name]
    columns = [ds.series.columns.index(c) for c in ds.channels]
    return ds.series.values[start:end][:, columns]


def attention_bytes_per_row(architecture: Mapping[str, Any]) -> int:
    """Bytes of one attention matrix per window of a model of this architecture (a ModelConfig as a
    dict): channels × heads × queries × L float32, one query row for a last-step model."""
    length = architecture["input_length"]
    queries = 1 if architecture.get("head") == "state" else length
    return architecture["channels"] * architecture["n_heads"] * queries * length * 4


def calibration_batch(architecture: dict[str, Any] | None) -> int:
    """Rows per session call for a model of this architecture (a ModelConfig as a dict; None, a graph
    that states none: the plain cap)."""
    if architecture is None:
        return _BATCH
    return max(1, min(_BATCH, _ATTENTION_BYTES // attention_bytes_per_row(architecture)))


def split_forecasts(
    model_path: Path,
    ds: Dataset,
    split: Split,
    period: int | None,
    batch: int = _BATCH,
    limit: int | None = None,
) -> SplitForecasts:
    """Run every window of `split` (stride 1, none dropped; the first `limit` when given) through the
    ONNX graph, `batch` at a time."""
    raw = _raw_rows(ds, split)
    L, H = split.input_length, split.horizon
    n = split.num_windows if limit is None else min(limit, split.num_windows)
    # [N, C, L] views -> [N, L, C]; the graph wants C-ordered float32 like a request's window.
    windows = np.lib.stride_tricks.sliding_window_view(raw, L, axis=0)[:n].transpose(0, 2, 1)
    targets = np.lib.stride_tricks.sliding_window_view(raw, H, axis=0)[L : L + n].transpose(0, 2, 1)
    windows = np.ascontiguousarray(windows, dtype=np.float32)
    phases = split.phases(np.arange(n), period).numpy() if period else None
    session = _session(model_path)
    out = []
    for i in range(0, n, batch):
        feeds: dict[str, np.ndarray] = {FORECAST_INPUT: windows[i : i + batch]}
        if phases is not None:
            feeds[PHASE_INPUT] = phases[i : i + batch]
        out.append(session.run([FORECAST_OUTPUT], feeds)[0])
    return SplitForecasts(windows, np.ascontiguousarray(targets, dtype=np.float64), np.concatenate(out))


def _lower_quantile(scores: np.ndarray, level: float) -> np.ndarray:
    """The mirror image of `conformal_quantile` for a lower tail: the floor((n + 1)·level)-th smallest."""
    n = scores.shape[0]
    rank = max(math.floor((n + 1) * level), 1)
    return np.partition(scores, rank - 1, axis=0)[rank - 1]


def _float32_up(values: np.ndarray) -> np.ndarray:
    """float32 no smaller than `values` (the served width must not undercut the calibrated one)."""
    out = values.astype(np.float32)
    low = out.astype(np.float64) < values
    out[low] = np.nextafter(out[low], np.float32(np.inf))
    return out


def calibrate(residuals: np.ndarray, levels: Sequence[float]) -> np.ndarray:
    """Widths [K, H, C] (float32): per level (percent), step and channel, the conformal quantile of the
    absolute residuals [n, H, C]."""
    scores = np.abs(residuals)
    return np.stack([_float32_up(conformal_quantile(scores, level / 100)) for level in levels])


@dataclass(frozen=True)
class Method:
    """One way to calibrate (docs/intervals.md): which validation windows count, and whether the scores
    are |y − ŷ| or |y − ŷ| / s for each window's own spread s (then the service multiplies the widths
    by the request's s, `WindowScaleSpec`)."""

    name: str
    description: str
    windows: Literal["all", "recent", "weighted"] = "all"
    statistic: Literal["std", "mean_abs_diff"] | None = None  # None: unscaled
    rows: int | None = None  # the window's last rows the spread is taken over; None: all of them
    power: float = 1.0


# The candidates `select_method` chooses among on validation-internal splits, never on test.
METHODS: tuple[Method, ...] = (
    Method("absolute", "|y − ŷ| per step and channel over every calibration window (versions 3-4)"),
    Method("recent", "the same over the most recent half of the calibration windows", windows="recent"),
    Method(
        "weighted",
        "weighted conformal: window i of n weighs 2^(−(n − 1 − i) / (n/4)), a half-life of a quarter of them",
        windows="weighted",
    ),
    Method("scaled", "|y − ŷ| / s, s the window's std per channel (RevIN's), widths × s", statistic="std"),
    Method("scaled-week", "as scaled, s over the window's last 168 rows", statistic="std", rows=168),
    Method("scaled-4days", "as scaled, s over the window's last 96 rows", statistic="std", rows=96),
    Method("scaled-day", "as scaled, s over the window's last 24 rows", statistic="std", rows=24),
    Method("scaled-diff", "as scaled, s the window's mean |x_t − x_t−1|", statistic="mean_abs_diff"),
    Method("scaled-diff-week", "as scaled-diff over the last 168 rows", statistic="mean_abs_diff", rows=168),
    Method(
        "scaled-sqrt", "as scaled with √s: halfway between absolute and scaled", statistic="std", power=0.5
    ),
    Method(
        "scaled-recent", "scaled over the most recent half of the windows", windows="recent", statistic="std"
    ),
)
_METHODS = {m.name: m for m in METHODS}
TARGET_LEVELS = (80.0, 90.0, 95.0)
OVERALL_BAND, CHANNEL_BAND = 3.0, 6.0  # points off nominal allowed overall and on each channel
ORIGINS = 4  # validation blocks of the rolling origins (as export/readout.py)
_MIN_CALIBRATION = 200  # windows an origin needs to calibrate on, else it is left out
_TIE = 0.05  # points: methods this close to the best are told apart by their interval score


@dataclass(frozen=True)
class WindowScaleSpec:
    """The manifest's `intervals.window_scale` (docs/artifacts.md) as the exporter writes it; the spread
    itself is the contract's `window_scale`, as the service computes it."""

    statistic: str
    rows: int
    power: float
    floor: tuple[float, ...]

    def scale(self, windows: np.ndarray) -> np.ndarray:
        return window_scale(windows, self.statistic, self.rows, self.power, self.floor)

    def model_dump(self) -> dict[str, Any]:
        return {
            "statistic": self.statistic,
            "rows": self.rows,
            "power": self.power,
            "floor": list(self.floor),
        }


def window_scale_spec(method: Method, calibration_windows: np.ndarray) -> WindowScaleSpec | None:
    """The spread the widths of `method` scale with, floored per channel at _SCALE_FLOOR of its median over
    the calibration windows (a flat window would divide by zero); None for an unscaled method."""
    if method.statistic is None:
        return None
    _, length, channels = calibration_windows.shape
    rows = min(method.rows or length, length)
    tiny = float(np.finfo(np.float64).tiny)
    raw = WindowScaleSpec(statistic=method.statistic, rows=rows, power=1.0, floor=(tiny,) * channels)
    spread = raw.scale(calibration_windows)[:, 0].astype(np.float64)  # [n, C], unfloored
    floor = tuple(float(v) for v in _SCALE_FLOOR * np.median(spread, axis=0))
    return WindowScaleSpec(statistic=method.statistic, rows=rows, power=method.power, floor=floor)


def _weighted_quantile(scores: np.ndarray, weights: np.ndarray, level: float) -> np.ndarray:
    """Weighted split conformal (Barber et al. 2023) over axis 0 of `scores` [n, ...] with window weights
    [n]: the smallest score whose weight share, the test point counted with weight 1 at +∞, reaches
    `level`; the largest score when none does."""
    order = np.argsort(scores, axis=0)
    ranked = np.take_along_axis(scores, order, axis=0)
    share = np.cumsum(weights[order], axis=0) / (weights.sum() + 1.0)
    reached = share >= level
    first = np.where(reached.any(axis=0), reached.argmax(axis=0), scores.shape[0] - 1)
    return np.take_along_axis(ranked, first[None], axis=0)[0]


def fit_method(
    method: Method, calibration: SplitForecasts, levels: Sequence[float]
) -> tuple[np.ndarray, WindowScaleSpec | None]:
    """Widths [K, H, C] float32 (rounded up) of `method` on `calibration`, and its window scale."""
    scale = window_scale_spec(method, calibration.windows)
    scores = np.abs(calibration.residuals)
    if scale is not None:
        scores = scores / scale.scale(calibration.windows).astype(np.float64)
    n = scores.shape[0]
    if method.windows == "recent":
        scores = scores[n - n // 2 :]
    if method.windows == "weighted":
        weights = 0.5 ** (np.arange(n - 1, -1, -1) / (n / 4))
        widths = [_weighted_quantile(scores, weights, level / 100) for level in levels]
    else:
        widths = [conformal_quantile(scores, level / 100) for level in levels]
    return np.stack([_float32_up(w) for w in widths]), scale


def served_intervals(block: Mapping[str, Any]) -> tuple[list[float], np.ndarray, WindowScaleSpec | None]:
    """A manifest's `intervals` block as the service reads it: levels, widths [K, H, C] float32 and the
    window scale (None: unscaled)."""
    ws = block.get("window_scale")
    scale = (
        WindowScaleSpec(ws["statistic"], ws["rows"], ws.get("power", 1.0), tuple(ws["floor"])) if ws else None
    )
    return list(block["levels"]), np.asarray(block["widths"], dtype=np.float32), scale


def served_bounds(
    widths: np.ndarray, scale: WindowScaleSpec | None, data: SplitForecasts, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The bounds the service answers at level position `k` for every window of `data`, in float32 as it
    computes them (app/inference/intervals.py)."""
    w = widths[k] if scale is None else widths[k][None] * scale.scale(data.windows)
    return data.forecasts - w, data.forecasts + w


def _coverage_errors(
    widths: np.ndarray, scale: WindowScaleSpec | None, data: SplitForecasts, levels: Sequence[float]
) -> dict[float, Any]:
    """Per target level: (overall coverage, coverage per channel [C], interval score in target units)."""
    out = {}
    y = data.targets
    for k, level in enumerate(levels):
        if level not in TARGET_LEVELS:
            continue
        lo, hi = served_bounds(widths, scale, data, k)
        inside = (y >= lo) & (y <= hi)
        out[level] = (float(inside.mean()), inside.mean(axis=(0, 1)), _winkler(lo, hi, y, 1 - level / 100))
    return out


def _subset(data: SplitForecasts, first: int, last: int) -> SplitForecasts:
    return SplitForecasts(data.windows[first:last], data.targets[first:last], data.forecasts[first:last])


def validation_splits(n: int, horizon: int) -> list[tuple[str, int, int, int]]:
    """(name, calibration end, evaluation start, evaluation end) over n validation windows: the rolling
    origins (ORIGINS blocks; each later block calibrated on every window whose targets end before it)
    and the first half calibrating the second. Never a window whose targets reach the scored ones."""
    edges = [round(k * n / ORIGINS) for k in range(ORIGINS + 1)]
    out = [
        (f"origin {k}", edges[k] - horizon + 1, edges[k], edges[k + 1])
        for k in range(1, ORIGINS)
        if edges[k] - horizon + 1 >= _MIN_CALIBRATION
    ]
    half = n // 2
    if half - horizon + 1 >= _MIN_CALIBRATION:
        out.append(("halves", half - horizon + 1, half, n))
    return out


def select_method(
    val: SplitForecasts, levels: Sequence[float], std: np.ndarray, methods: Sequence[Method] = METHODS
) -> tuple[str, dict[str, Any]]:
    """The method to serve, chosen on validation-internal splits only: the smallest mean distance outside
    the target bands (coverage within ±3 points of nominal overall and ±6 on each channel at 80/90/95%),
    ties within 0.05 points broken by the lower interval score at 90% (units of the training std).
    Returns its name and every method's numbers by its name (a dict of floats), beside "splits": the
    splits' names (a list of str)."""
    H = val.targets.shape[1]
    splits = validation_splits(len(val.targets), H)
    if not splits:
        return "absolute", {}
    table: dict[str, dict[str, float]] = {}
    for method in methods:
        outside, overall, channel, score = [], [], [], []
        for _, cal_end, first, last in splits:
            widths, scale = fit_method(method, _subset(val, 0, cal_end), levels)
            errors = _coverage_errors(widths, scale, _subset(val, first, last), levels)
            for level in TARGET_LEVELS:
                if level not in errors:
                    continue
                cov, per_channel, _ = errors[level]
                off, off_c = abs(100 * cov - level), np.abs(100 * per_channel - level)
                outside.append(
                    max(0.0, off - OVERALL_BAND) + float(np.maximum(off_c - CHANNEL_BAND, 0).mean())
                )
                overall.append(off)
                channel.append(float(off_c.max()))
            if 90.0 in errors:
                score.append(float((errors[90.0][2] / std).mean()))
        table[method.name] = {
            "outside_bands": float(np.mean(outside)),
            "coverage_error": float(np.mean(overall)),
            "channel_error_max": float(np.max(channel)),
            "score90": float(np.mean(score)) if score else math.nan,
        }
    best = min(v["outside_bands"] for v in table.values())
    close = [name for name, v in table.items() if v["outside_bands"] <= best + _TIE]
    chosen = min(close, key=lambda name: table[name]["score90"])
    return chosen, {"splits": [s[0] for s in splits], **table}


def _float32_text(value: np.float32) -> float:
    """The float whose shortest repr is the float32's shortest repr, so that JSON holds e.g. 2.54 (what
    the service casts back to exactly this float32) rather than 2.5399999618530273."""
    return float(str(value))


def intervals_block(
    widths: np.ndarray,
    levels: Sequence[float],
    calibration: dict[str, Any],
    scale: WindowScaleSpec | None = None,
) -> dict[str, Any]:
    """The manifest's `intervals` object (docs/artifacts.md)."""
    return {
        "method": "split_conformal",
        "residuals": "absolute",
        "scale": "none" if scale is None else "window",
        **({} if scale is None else {"window_scale": scale.model_dump()}),
        "levels": [float(level) for level in levels],
        "widths": [
            [[_float32_text(v) for v in row] for row in per_level] for per_level in widths.astype(np.float32)
        ],
        "calibration": calibration,
    }


def _calibration_record(ds: Dataset, n_windows: int) -> dict[str, Any]:
    start, end = ds.borders[CALIBRATION_SPLIT]
    return {
        "split": CALIBRATION_SPLIT,
        "rows": [start, end],
        "windows": n_windows,
        "dataset": ds.series.path.name,
        "sha256": ds.series.sha256,
    }


def calibrate_dataset(
    model_path: Path,
    ds: Dataset,
    period: int | None,
    levels: Sequence[float] = DEFAULT_LEVELS,
    batch: int = _BATCH,
) -> dict[str, Any]:
    """The `intervals` block of the graph at `model_path`, calibrated on the data set's validation split
    by the method `select_method` chooses on splits of that split."""
    val = split_forecasts(model_path, ds, ds.val, period, batch)
    std = np.asarray(ds.scaler.std, dtype=np.float64)
    chosen, selection = select_method(val, levels, std)
    widths, scale = fit_method(_METHODS[chosen], val, levels)
    record = {**_calibration_record(ds, len(val.targets)), "method": chosen, "selection": selection}
    return intervals_block(widths, levels, record, scale)


def for_checkpoint(
    model_path: Path, info: dict[str, Any], levels: Sequence[float] = DEFAULT_LEVELS
) -> dict[str, Any] | None:
    """The export's hook: intervals for a graph just exported from a checkpoint, at the `levels` its
    validation windows can calibrate (export/calibration_size.py, logged), or None (logged) when there are
    too few of them or its data set cannot be read (export itself does not need it)."""
    from export.evaluate import load_for_checkpoint

    try:
        ds = load_for_checkpoint(info)
    except (DataError, OSError) as e:
        log.warning("no prediction intervals: the training data cannot be read (%s)", e)
        return None
    kept, note = calibration_plan(ds.val.num_windows, levels)
    (log.info if kept else log.warning)("%s", note)
    if not kept:
        return None
    config = info["model_config"]
    return calibrate_dataset(model_path, ds, config.get("cycle_period"), kept, calibration_batch(config))


# -- an exported version ---------------------------------------------------------------------------


def load_for_manifest(manifest: dict[str, Any], data: Path | None = None) -> Dataset:
    """The data set a version was trained on (or `data`), split the way training split it."""
    d = manifest.get("dataset") or {}
    if data is None and not d:
        raise DataError("the manifest names no data set; pass --data")
    path = data or (resolve(d["path"]) if d.get("path") else ETT_DIR / d["file"])
    options = ReadOptions.from_record(d)
    ds = load_dataset(
        path,
        manifest["input_length"],
        manifest["horizon"],
        mode=d.get("mode", "M"),
        target=d.get("target", "auto"),
        protocol=d.get("protocol", "auto") if data is None else "auto",
        options=options,
    )
    if ds.channels != list(manifest["channels"]):
        raise DataError(
            f"{path.name} gives the columns {ds.channels}; the model needs {manifest['channels']}"
        )
    if data is None and d.get("sha256") and ds.series.sha256 != d["sha256"]:
        raise DataError(f"{path} has changed since training (sha256 differs); pass --data to use it anyway")
    return ds


def publish(source: Path, block: dict[str, Any], version: int | None = None) -> Path:
    """`source` (a version folder) again as a new version of the same model with `block` as its
    intervals: graphs copied byte for byte (their sha256 checked), the manifest otherwise unchanged but
    for version, creation time and where it came from. Published through export/publish.py (a temporary
    folder renamed into place, under the service's folder rule)."""
    manifest = json.loads((source / MANIFEST_FILE).read_text())

    def write(staging: Path, version: int) -> None:
        for name in (MODEL_FILE, INSPECT_FILE):
            shutil.copyfile(source / name, staging / name)
            spec = manifest["files"][name]
            if _sha256(staging / name) != spec["sha256"]:
                raise ValueError(f"{source / name} differs from its manifest's sha256")
        manifest.update(
            version=version,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            intervals=block,
            derived_from={"version": int(source.name), "change": "prediction intervals added"},
        )
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")

    return publish_version(source.parent, write, version or None)


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- evaluation ------------------------------------------------------------------------------------

Bounds = Callable[[float], tuple[np.ndarray, np.ndarray]]  # level (percent) -> lower, upper [N, H, C]


def _winkler(lo: np.ndarray, hi: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """The interval score (Gneiting & Raftery 2007): width plus 2/α times the distance to a miss."""
    return (hi - lo) + (2 / alpha) * (np.maximum(lo - y, 0) + np.maximum(y - hi, 0))


def _score(bounds: Bounds, test: SplitForecasts, levels: Sequence[float], std: np.ndarray) -> list[dict]:
    """Per level: coverage (share of every test value inside), mean width and interval score in units of
    each channel's training std, coverage per horizon step, per channel, and per request horizon."""
    y = test.targets
    H = y.shape[1]
    out = []
    for level in levels:
        lo, hi = bounds(level)
        inside = (y >= lo) & (y <= hi)
        width = (hi - lo) / std
        score = _winkler(lo, hi, y, 1 - level / 100) / std
        out.append(
            {
                "level": float(level),
                "coverage": float(inside.mean()),
                "width": float(width.mean()),
                "winkler": float(score.mean()),
                "coverage_by_step": [round(float(v), 5) for v in inside.mean(axis=(0, 2))],
                "width_by_step": [round(float(v), 5) for v in width.mean(axis=(0, 2))],
                "coverage_by_channel": [round(float(v), 5) for v in inside.mean(axis=(0, 1))],
                "by_request_horizon": {
                    str(h): {
                        "coverage": float(inside[:, :h].mean()),
                        "width": float(width[:, :h].mean()),
                        "winkler": float(score[:, :h].mean()),
                    }
                    for h in sorted({h for h in (24, 48, 96, 192, 336, 720) if h < H} | {H})
                },
            }
        )
    return out


def evaluate(
    val: SplitForecasts,
    test: SplitForecasts,
    levels: Sequence[float],
    widths: np.ndarray,
    std: np.ndarray,
    scale: WindowScaleSpec | None = None,
) -> dict[str, list[dict]]:
    """The served intervals (`widths` and `scale`, as the artifact holds them) and every method of
    METHODS calibrated on all of `val`, scored on `test`; beside them two we measured before: signed
    residuals and a naive width pooled over the steps."""
    f, r = test.forecasts.astype(np.float64), val.residuals
    k = {level: i for i, level in enumerate(levels)}

    def bounds_of(w: np.ndarray, sc: WindowScaleSpec | None) -> Bounds:
        return lambda level: served_bounds(w, sc, test, k[level])  # float32, as the service answers

    def signed(level: float) -> tuple[np.ndarray, np.ndarray]:
        a = 1 - level / 100
        return f + _lower_quantile(r, a / 2), f + conformal_quantile(r, 1 - a / 2)

    pooled_scores = np.abs(r).reshape(-1, r.shape[2])  # every step of every window, per channel

    def pooled(level: float) -> tuple[np.ndarray, np.ndarray]:
        w = conformal_quantile(pooled_scores, level / 100)
        return f - w, f + w

    variants: dict[str, Bounds] = {"served": bounds_of(widths, scale)}
    for method in METHODS:
        variants[method.name] = bounds_of(*fit_method(method, val, levels))
    variants.update(signed=signed, pooled=pooled)
    return {name: _score(bounds, test, levels, std) for name, bounds in variants.items()}


def plot_bands(
    test: SplitForecasts,
    widths: np.ndarray,
    levels: Sequence[float],
    channels: list[str],
    channel: str,
    path: Path,
    scale: WindowScaleSpec | None = None,
) -> list[int]:
    """Three evenly spaced test windows of `channel` with their 80% and 95% bands; returns the windows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = channels.index(channel)
    n, L, H = len(test.targets), test.windows.shape[1], test.targets.shape[1]
    starts = [int(s) for s in np.linspace(0, n - 1, num=3).astype(np.int64)]
    fig, axes = plt.subplots(len(starts), 1, figsize=(10, 2.6 * len(starts)), squeeze=False)
    steps = np.arange(L, L + H)
    for ax, s in zip(axes[:, 0], starts, strict=True):
        f = test.forecasts[s, :, c]
        for level, shade in ((95, "0.85"), (80, "0.65")):
            lo, hi = served_bounds(widths, scale, _subset(test, s, s + 1), list(levels).index(level))
            ax.fill_between(steps, lo[0, :, c], hi[0, :, c], color=shade, lw=0, label=f"{level}% interval")
        ax.plot(np.arange(L), test.windows[s, :, c], color="0.4", lw=1, label="input")
        ax.plot(steps, test.targets[s, :, c], color="k", lw=1.2, label="truth")
        ax.plot(steps, f, color="tab:red", lw=1.2, label="forecast")
        ax.axvline(L - 0.5, color="0.8", lw=0.8)
        ax.set_ylabel(f"{channel} (raw)")
        ax.set_title(f"test window {s}", fontsize=9)
    axes[0, 0].legend(loc="upper left", fontsize=8, ncol=5)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return starts


def write_report(version_dir: Path, out_root: Path, data: Path | None = None) -> Path:
    """Evaluate a version that has intervals on its data set's test split: report.json and bands.png in
    `<out_root>/<model>-v<version>/`; returns that folder."""
    manifest = json.loads((version_dir / MANIFEST_FILE).read_text())
    levels, widths, scale = served_intervals(manifest["intervals"])
    block = manifest["intervals"]
    ds = load_for_manifest(manifest, data)
    period = (manifest.get("cycle") or {}).get("period")
    model_path = version_dir / MODEL_FILE
    batch = calibration_batch(manifest.get("architecture"))
    val = split_forecasts(model_path, ds, ds.val, period, batch)
    test = split_forecasts(model_path, ds, ds.test, period, batch)
    std = np.asarray(ds.scaler.std, dtype=np.float64)
    folder = out_root / f"{manifest['name']}-v{manifest['version']}"
    folder.mkdir(parents=True, exist_ok=True)
    channel = ds.target if ds.target in ds.channels else ds.channels[-1]
    shown = plot_bands(test, widths, levels, ds.channels, channel, folder / "bands.png", scale)
    served = block["calibration"].get("method", "absolute")
    _, selection = select_method(val, levels, std)  # what the rule finds on this version's validation split
    selection = dict(selection)
    splits = selection.pop("splits", [])
    start, end = ds.borders["test"]
    report = {  # checked field by field against IntervalEvaluation (export/reports.py)
        "model": manifest["name"],
        "version": manifest["version"],
        "dataset": ds.series.path.name,
        "horizon": manifest["horizon"],
        "input_length": manifest["input_length"],
        "channels": ds.channels,
        "levels": levels,
        "calibration": block["calibration"],
        "test": {"split": "test", "rows": [start, end], "windows": len(test.targets)},
        "units": "width and interval score in units of each channel's training standard deviation",
        "scale_floor": _SCALE_FLOOR,
        "served_method": served,
        "methods": {m.name: m.description for m in METHODS},
        "selection": selection,
        "selection_splits": splits,
        "variants": evaluate(val, test, levels, widths, std, scale),
        "plot": {"file": "bands.png", "channel": channel, "windows": shown},
        "command": f"python -m export.conformal {portable(version_dir)}",
    }
    save_report(folder / "report.json", build(IntervalEvaluation, report), indent=1)
    return folder


def main(
    version_dir: Annotated[
        Path, typer.Argument(help="an exported version folder, e.g. model_repository/etth1-rsa/2")
    ],
    data: Annotated[
        Path | None, typer.Option(help="CSV to calibrate and evaluate on (default: the training data)")
    ] = None,
    level: Annotated[
        list[float] | None,
        typer.Option(help="a level to calibrate, in percent (repeatable; default 50 80 90 95 99)"),
    ] = None,
    version: Annotated[int | None, typer.Option(help="the new version's number (default: next free)")] = None,
    out: Annotated[Path, typer.Option(help="where the evaluation report goes")] = Path("results/intervals"),
) -> None:
    """Calibrate prediction intervals for an exported version (published as a new version), then
    evaluate them on the test split."""
    version_dir = resolve(version_dir)
    manifest = json.loads((version_dir / MANIFEST_FILE).read_text())
    levels = sorted(level) if level else list(DEFAULT_LEVELS)
    if not all(0 < v < 100 for v in levels) or len(set(levels)) != len(levels):
        typer.echo("error: --level takes distinct percentages strictly between 0 and 100", err=True)
        raise typer.Exit(2)
    try:
        if not manifest.get("intervals"):
            ds = load_for_manifest(manifest, data)
            levels, note = calibration_plan(ds.val.num_windows, levels)
            if not levels:
                raise ValueError(note)
            period = (manifest.get("cycle") or {}).get("period")
            batch = calibration_batch(manifest.get("architecture"))
            block = calibrate_dataset(version_dir / MODEL_FILE, ds, period, levels, batch)
            version_dir = publish(version_dir, block, version)
            typer.echo(
                f"{portable(version_dir)}: intervals at levels {levels} from "
                f"{block['calibration']['windows']} validation windows"
            )
        folder = write_report(version_dir, resolve(out), data)
    except (DataError, FileExistsError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for row in read_report(folder / "report.json", IntervalEvaluation).variants["served"]:
        typer.echo(
            f"level {row.level:g}: test coverage {100 * row.coverage:.1f}%, "
            f"mean width {row.width:.3f}, interval score {row.winkler:.3f}"
        )
    typer.echo(f"wrote {portable(folder)}")


if __name__ == "__main__":
    typer.run(main)
