"""The parts of the `/v1` evaluation answers (app/protocols/rsa_v1/evaluation.py runs the evaluations):
the version that answered, the metrics beside the seasonal naive forecast's, a backtest window's
in-sample flag and its JSON object, an anomaly check's series. Nothing about HTTP or the engine."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from app.artifacts.manifest import Manifest, TrainingSpec
from app.engine.catalog import VersionEntry
from app.inference.backtest import History, naive_scale, season_of
from app.inference.metrics import Accuracy, PointErrors, seasonal_naive_at


def answered_by(entry: VersionEntry, manifest: Manifest) -> dict[str, Any]:
    """The keys an evaluation's answer opens with: the version that answered, as a forecast names it."""
    return {
        "model": entry.name,
        "version": entry.version,
        "provider": entry.provider or "",
        "channels": list(manifest.channels),
    }


def scored_metrics(result: Accuracy, naive: Accuracy | None = None) -> dict[str, Any]:
    """The answer's metrics, with the seasonal naive forecast's on the same points beside them."""
    out = result.as_dict()
    if naive is not None:
        out["seasonal_naive"] = naive.as_dict()
    return out


def scorer(
    manifest: Manifest,
    histories: list[History],
    cutoffs: list[list[int]],
    outputs: np.ndarray,
    horizon: int,
    n_windows: int,
    bounds: dict[float, tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, Callable[[Any, Any], dict[str, Any]]]:
    """The backtest's actuals [S·K, h, C] (NaN: missing) and its scorer: `scored(rows, c)`, the metrics
    of windows `rows`, channel `c` (all: slice(None)), coverage of the intervals `bounds` (per level, lo
    and hi shaped like `outputs`) included, with the seasonal naive forecast's (the season MASE's scale
    uses) on the same points beside them; `n_windows` cutoffs a series. Every point's errors are computed
    once (`PointErrors`); each call sums its slice."""
    actual = np.stack(
        [h.values[t : t + horizon] for h, points in zip(histories, cutoffs, strict=True) for t in points]
    )  # [S·K, h, C] float64, NaN: missing
    period = season_of(manifest)
    scales = np.stack(
        [naive_scale(h.values, points[0], period) for h, points in zip(histories, cutoffs, strict=True)]
    )
    point_scale = np.repeat(scales, n_windows, axis=0)[:, None, :]  # [S·K, 1, C]
    # The seasonal naive forecast of each window (the season MASE's scale uses), scored on the same points.
    naive = np.concatenate(
        [
            seasonal_naive_at(h.values, points, horizon, period)
            for h, points in zip(histories, cutoffs, strict=True)
        ]
    )

    model_errors = PointErrors.of(actual, outputs, point_scale, bounds)
    naive_errors = PointErrors.of(actual, naive, point_scale)

    def scored(rows: Any, c: Any) -> dict[str, Any]:
        at = (rows, slice(None), c)
        return scored_metrics(model_errors.summary(at), naive_errors.summary(at))

    return actual, scored


def is_in_sample(
    training: TrainingSpec | None, history: History, stamps: list[datetime] | None
) -> bool | None:
    """Whether a window's first actual value is at or before the end of the model's training data (that
    series' own where its id was trained on); None without timestamps or a training record."""
    if training is None or not stamps:
        return None
    first = stamps[0] if stamps[0].tzinfo is not None else stamps[0].replace(tzinfo=UTC)
    return first <= training.end_of(history.id)


def backtest_window(
    k: int,
    cutoff: int,
    stamps: list[datetime] | None,
    in_sample: bool | None,
    outputs: np.ndarray,
    actual: np.ndarray,
    bounds: dict[float, tuple[np.ndarray, np.ndarray]],
    filled: np.ndarray,
    unsent: int,
) -> dict[str, Any]:
    """The answer of the backtest's window `k` (its row of `outputs`, `actual`, the bounds and `filled`),
    its keys in the answer's order."""
    window: dict[str, Any] = {
        "cutoff": cutoff,
        "timestamps": stamps,
        "forecast": outputs[k],
        "actual": actual[k],
        "in_sample": in_sample,
    }
    for level, (lo, hi) in bounds.items():
        window[f"lo-{level:g}"] = lo[k]
        window[f"hi-{level:g}"] = hi[k]
    if filled[k]:
        window["filled"] = int(filled[k])
    if unsent:
        window["future_unsent"] = unsent
    return window


def anomaly_series(
    histories: list[History],
    points: list[list[int]],
    stamps: list[list[datetime] | None],
    actual: np.ndarray,
    shown: tuple[np.ndarray, np.ndarray, np.ndarray],
    flag: np.ndarray,
    score: np.ndarray,
    unsent: list[list[int]],
    replaced: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """Each series' part of detect_anomalies' answer: its points' rows of the arrays over every point
    (`replaced`: the repair's, [N, C]; a series' only where it replaced a value)."""
    forecast, lo, hi = shown
    series_out = []
    first = 0
    for s, history in enumerate(histories):
        rows = slice(first, first + len(points[s]))
        first = rows.stop
        answer: dict[str, Any] = {}
        if any(unsent[s]):
            answer["future_unsent"] = unsent[s]
        if replaced is not None and replaced[rows].any():
            answer["replaced"] = replaced[rows]
        series_out.append(
            {
                "id": history.id,
                "index": points[s],
                "timestamps": stamps[s],
                "actual": actual[rows],
                "forecast": forecast[rows],
                "lo": lo[rows],
                "hi": hi[rows],
                "anomaly": flag[rows],
                "score": score[rows],
                "anomalies": int(flag[rows].sum()),
                **answer,
            }
        )
    return series_out
