"""Split-conformal calibration methods (export/conformal.py's; docs/intervals.md): the forecasts of a
split (`SplitForecasts`), the candidate methods (`METHODS`: which validation windows count, whether the
scores are divided by each window's own spread), their widths (`fit_method`), the bounds the service
answers with them (`served_bounds`, `served_intervals`), and the choice among them on validation-internal
splits only (`select_method`: rolling origins and halves, never the test split).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from app.artifacts.conformal import conformal_quantile
from app.artifacts.contract import window_scale

__all__ = [
    "METHODS",
    "Method",
    "SplitForecasts",
    "WindowScaleSpec",
    "fit_method",
    "select_method",
    "served_bounds",
    "served_intervals",
    "validation_splits",
    "window_scale_spec",
]

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


def _float32_up(values: np.ndarray) -> np.ndarray:
    """float32 no smaller than `values` (the served width must not undercut the calibrated one)."""
    out = values.astype(np.float32)
    low = out.astype(np.float64) < values
    out[low] = np.nextafter(out[low], np.float32(np.inf))
    return out


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


def _winkler(lo: np.ndarray, hi: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """The interval score (Gneiting & Raftery 2007): width plus 2/α times the distance to a miss."""
    return (hi - lo) + (2 / alpha) * (np.maximum(lo - y, 0) + np.maximum(y - hi, 0))
