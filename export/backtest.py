"""The offline backtest of an exported version: its ONNX graph over the windows of a split of its data
set, as calibration runs it, scored by the metrics the service's backtest answers with
(`app.inference.metrics`). It is the reference `/v1/models/{name}/cross_validation` is checked against
(tests/app/protocols/rsa_v1/test_evaluation.py on a slice, `python -m bench.backtest` on the whole test
split). export/evaluate.py scores a torch checkpoint on the scaled data instead.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from app.artifacts.contract import MANIFEST_FILE, MODEL_FILE
from app.inference.metrics import accuracy, seasonal_naive_scale
from export.conformal import (
    _raw_rows,
    calibration_batch,
    load_for_manifest,
    served_bounds,
    served_intervals,
    split_forecasts,
)

__all__ = ["evaluate_version", "split_rows"]


def split_rows(version_dir: Path, split: Literal["train", "val", "test"] = "test") -> tuple[str, np.ndarray]:
    """A split's rows as the file holds them (float64 [n, C], the model's channel order; the L rows
    before the split's first target included) and the first row's timestamp (ISO 8601, UTC): the
    history a backtest of the split sends."""
    manifest = json.loads((version_dir / MANIFEST_FILE).read_text())
    ds = load_for_manifest(manifest)
    start, _ = ds.borders[split]
    stamp = np.datetime_as_string(ds.series.timestamps[start], unit="s") + "Z"
    return str(stamp), _raw_rows(ds, getattr(ds, split))


def evaluate_version(
    version_dir: Path,
    split: Literal["train", "val", "test"] = "test",
    horizon: int | None = None,
    levels: Sequence[float] = (),
    windows: int | None = None,
) -> dict[str, Any]:
    """An exported version's accuracy on the raw scale over the first `windows` windows (stride 1; all
    when None) of a split of its data set: its ONNX graph run as calibration runs it
    (`export.conformal.split_forecasts`), the served intervals at `levels`, the metrics of
    `app.inference.metrics` (MASE scaled by the seasonal naive error of the L rows before the first
    window, the model's cycle as the season). The service's backtest (`/v1/.../cross_validation`) of the
    split's rows answers the same numbers (tests/app/protocols/rsa_v1/test_evaluation.py, bench/backtest.py).
    Returns {"windows", "metrics", "channel_metrics"}."""
    manifest = json.loads((version_dir / MANIFEST_FILE).read_text())
    ds = load_for_manifest(manifest)
    part = getattr(ds, split)
    cycle = manifest.get("cycle") or {}
    period = cycle.get("period")
    batch = calibration_batch(manifest.get("architecture"))
    data = split_forecasts(version_dir / MODEL_FILE, ds, part, period, batch, limit=windows)
    h = horizon or manifest["horizon"]
    L = manifest["input_length"]
    bounds: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    if levels:
        served, widths, scale = served_intervals(manifest["intervals"])
        for level in levels:
            lo, hi = served_bounds(widths, scale, data, served.index(level))
            bounds[level] = (lo[:, :h], hi[:, :h])
    raw = _raw_rows(ds, part)
    scales = np.array([seasonal_naive_scale(raw[:L, c], period or 1) for c in range(raw.shape[1])])
    actual, forecast = data.targets[:, :h], data.forecasts[:, :h]
    return {
        "windows": len(actual),
        "metrics": accuracy(actual, forecast, scales[None, None], bounds).as_dict(),
        "channel_metrics": {
            channel: accuracy(
                actual[..., c],
                forecast[..., c],
                scales[c],
                {level: (lo[..., c], hi[..., c]) for level, (lo, hi) in bounds.items()},
            ).as_dict()
            for c, channel in enumerate(manifest["channels"])
        },
    }
