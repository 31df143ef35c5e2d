"""The evaluation of a version's prediction intervals on its test split (export/conformal.py writes
the report, export/results.py reads it): coverage, mean width and the interval (Winkler) score per
level, per horizon step, per channel and per request horizon, for the served widths beside every
candidate method calibrated on the whole validation split, signed residuals and a width pooled over the
steps; and the bands' picture.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from app.artifacts.conformal import conformal_quantile
from export.conformal_methods import (
    METHODS,
    SplitForecasts,
    WindowScaleSpec,
    _subset,
    _winkler,
    fit_method,
    served_bounds,
)

__all__ = ["Bounds", "evaluate", "plot_bands"]


def _lower_quantile(scores: np.ndarray, level: float) -> np.ndarray:
    """The mirror image of `conformal_quantile` for a lower tail: the floor((n + 1)·level)-th smallest."""
    n = scores.shape[0]
    rank = max(math.floor((n + 1) * level), 1)
    return np.partition(scores, rank - 1, axis=0)[rank - 1]


Bounds = Callable[[float], tuple[np.ndarray, np.ndarray]]  # level (percent) -> lower, upper [N, H, C]


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
