"""Figures for training reports (matplotlib, Agg: no display needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from export.calibration_size import MIN_CALIBRATION_WINDOWS, min_windows
from export.conformal import conformal_quantile
from export.data import Dataset, Split
from export.evaluate import predict
from models import RSAForecaster

__all__ = ["band_widths", "plot_forecasts"]

BAND_LEVELS = (95, 80)  # drawn widest first


@torch.no_grad()
def band_widths(model: RSAForecaster, split: Split, channel: int, batch: int = 512) -> dict[int, np.ndarray]:
    """Per level (percent), the split-conformal width [H] of `channel` on the standardised scale from every
    window of `split` (the validation split): what the export will calibrate (docs/intervals.md), here
    from PyTorch's forecasts. Empty below MIN_CALIBRATION_WINDOWS windows; a level without its rank is
    left out (export/calibration_size.py)."""
    n = split.num_windows
    if n < MIN_CALIBRATION_WINDOWS:
        return {}
    scores = []
    for start in range(0, n, batch):
        pred, y = predict(model, split, torch.arange(start, min(start + batch, n)))
        scores.append((pred - y)[:, :, channel].abs().numpy())
    residuals = np.concatenate(scores).astype(np.float64)
    return {
        level: conformal_quantile(residuals, level / 100) for level in BAND_LEVELS if min_windows(level) <= n
    }


@torch.no_grad()
def plot_forecasts(
    model: RSAForecaster, ds: Dataset, path: Path, n_windows: int = 3, title: str = ""
) -> None:
    """Forecast against the truth on `n_windows` evenly spaced test windows of the target channel (or the
    last one), on the file's own scale and dates, with the 80% and 95% bands the validation windows
    calibrate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    model = model.eval()
    split = ds.test
    starts = np.linspace(0, split.num_windows - 1, num=max(1, n_windows)).astype(np.int64)
    x, y = split.windows(starts)
    pred, _ = predict(model, split, torch.from_numpy(starts))
    c = ds.channels.index(ds.target) if ds.target in ds.channels else len(ds.channels) - 1
    mean, std = float(ds.scaler.mean[c]), float(ds.scaler.std[c])  # type: ignore[index]

    def raw(values: torch.Tensor | np.ndarray) -> np.ndarray:
        return np.asarray(values, dtype=np.float64) * std + mean

    widths = band_widths(model, ds.val, c)
    L, H = split.input_length, split.horizon
    shown = min(L, max(4 * H, 48))  # the input's last steps: a long window would squeeze the forecast
    times = split.timestamps
    fig, axes = plt.subplots(len(starts), 1, figsize=(10, 2.8 * len(starts)), squeeze=False)
    for ax, i, s in zip(axes[:, 0], range(len(starts)), starts, strict=True):
        past, future = times[s + L - shown : s + L], times[s + L : s + L + H]
        forecast = raw(pred[i, :, c])
        for level, shade in zip(BAND_LEVELS, ("0.85", "0.7"), strict=True):
            if level in widths:
                w = widths[level] * std
                ax.fill_between(
                    future, forecast - w, forecast + w, color=shade, lw=0, label=f"{level}% interval"
                )
        ax.plot(past, raw(x[i, L - shown :, c]), color="0.45", lw=1, label="input")
        ax.plot(future, raw(y[i, :, c]), color="k", lw=1.2, label="truth")
        ax.plot(future, forecast, color="tab:red", lw=1.2, label="forecast")
        ax.axvline(future[0], color="0.8", lw=0.8)
        ax.set_ylabel(ds.channels[c])
        first = np.datetime_as_string(future[0], unit="m").replace("T", " ")
        ax.set_title(
            f"test window {int(s)}: forecast from {first} UTC (the input's last {shown} steps shown)",
            fontsize=9,
        )
        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    axes[0, 0].legend(loc="upper left", fontsize=8, ncol=5)
    band = (
        f"bands: split conformal on the {ds.val.num_windows} validation windows"
        if widths
        else f"no band: {ds.val.num_windows} validation windows, fewer than {MIN_CALIBRATION_WINDOWS}"
    )
    fig.suptitle(f"{title}\n{ds.channels[c]} on its own scale; {band}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
