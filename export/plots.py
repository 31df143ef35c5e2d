"""Figures for training reports (matplotlib, Agg: no display needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from export.data import Dataset
from export.evaluate import predict
from models import RSAForecaster

__all__ = ["plot_forecasts"]


@torch.no_grad()
def plot_forecasts(
    model: RSAForecaster, ds: Dataset, path: Path, n_windows: int = 3, title: str = ""
) -> None:
    """Forecast against the truth on `n_windows` evenly spaced test windows, for the target channel
    (or the last one), on the scaled data the metrics use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    split = ds.test
    starts = np.linspace(0, split.num_windows - 1, num=max(1, n_windows)).astype(np.int64)
    x, y = split.windows(starts)
    pred, _ = predict(model.eval(), split, torch.from_numpy(starts))
    c = ds.channels.index(ds.target) if ds.target in ds.channels else len(ds.channels) - 1
    L, H = split.input_length, split.horizon
    fig, axes = plt.subplots(len(starts), 1, figsize=(10, 2.6 * len(starts)), squeeze=False)
    for ax, i, s in zip(axes[:, 0], range(len(starts)), starts, strict=True):
        ax.plot(np.arange(L), x[i, :, c], color="0.5", lw=1, label="input")
        ax.plot(np.arange(L, L + H), y[i, :, c], color="k", lw=1.2, label="truth")
        ax.plot(np.arange(L, L + H), pred[i, :, c], color="tab:red", lw=1.2, label="forecast")
        ax.axvline(L - 0.5, color="0.8", lw=0.8)
        ax.set_ylabel(f"{ds.channels[c]} (scaled)")
        ax.set_title(f"test window {int(s)}", fontsize=9)
    axes[0, 0].legend(loc="upper left", fontsize=8, ncol=3)
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
