"""The artifact contract's names (docs/artifacts.md): the one copy, read by the exporter and the service.

Imports nothing at module level, so `export/` can use it without pulling in the service. The manifest's
fields and the shapes are documented in docs/artifacts.md and checked in `app/artifacts/manifest.py`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

# The standard library alone: the calendar frequencies' pattern, which every path reads.
from rsa_core.calendar import CALENDAR_FREQUENCY as CALENDAR_FREQUENCY

if TYPE_CHECKING:  # for annotations only: numpy is imported where it is used
    import numpy as np
    from numpy.typing import ArrayLike

# Files of a version folder: <repository>/<model>/<version>/...
MODEL_FILE = "model.onnx"  # the forecast graph
INSPECT_FILE = "inspect.onnx"  # the same network plus attention-inspection outputs
MANIFEST_FILE = "manifest.json"
# A version folder's name: a positive integer written without leading zeros ("1", "12"; never "01" or
# "0"). The service serves only those (app/artifacts/repository.py); the exporter publishes only those.
VERSION_FOLDER = re.compile(r"[1-9][0-9]*")

# Graph inputs. `phase` exists exactly when the manifest has a `cycle`.
FORECAST_INPUT = "window"  # float32 [batch, L, C], raw values
PHASE_INPUT = "phase"  # int64 [batch], each window's phase in the seasonal cycle
# float32 [batch, D]: a global model's raw covariates (app/artifacts/covariates.py lays them out); exactly
# when the manifest's `panel.covariates` is set.
COVARIATE_INPUT = "covariates"
# A hybrid global model's local half (app/artifacts/local_models.py), computed from the window by
# `build_feed`: float32 [batch, H], the local models' weighted forecasts, and float32 [batch, 1], their
# summed weight (0 for a series too short for them); exactly when the manifest's `panel.local` is set.
LOCAL_INPUT = "local"
LOCAL_WEIGHT_INPUT = "local_weight"

# A global model's manifest `kind` (docs/artifacts.md, "Global models"): the closed-form REM read-out,
# which the service can refit on request (its `readout` block), and the global RSA-Transformer, which it
# serves the same way but never refits (a network is trained offline).
GLOBAL_READOUT_KIND = "global_readout"
GLOBAL_TRANSFORMER_KIND = "global_transformer"

# Graph outputs.
FORECAST_OUTPUT = "forecast"  # float32 [batch, H, C], raw scale
ATTN_SOFTMAX = "attn_softmax"  # [batch, C, N, Hh, L, L]
ATTN_REM = "attn_rem"  # [N, Hh, L, L]
ATTN_MIXED = "attn_mixed"  # [batch, C, N, Hh, L, L]
INSPECT_OUTPUTS = (FORECAST_OUTPUT, ATTN_SOFTMAX, ATTN_REM, ATTN_MIXED)

BATCH_AXIS = "batch"  # the name of the one dynamic axis in the manifest's shapes


def forecast_columns(model: str, channels: list[str] | tuple[str, ...]) -> list[str]:
    """A tabular forecast's column names (NeuralForecast's and TimeGPT's rule): the model's name for a
    one-channel model (its intervals `{model}-lo-80`, `{model}-hi-80`), `{model}-{channel}` for each
    channel of a wider one; never the target's own name, so a forecast merges with the actuals without
    suffixes. `python -m batch score` and `export.panel forecast` use it; the client (installed without
    the project) keeps the same rule in `rsa_client.forecast_columns` (tests/client/test_columns.py)."""
    if len(channels) == 1:
        return [model]
    return [f"{model}-{c}" for c in channels]


# A calendar frequency (the manifest's `frequency`, e.g. "3MS"): CALENDAR_FREQUENCY, imported above from
# rsa_core.calendar, the one copy; any other frequency is a fixed step of `frequency_seconds`.

# The CUDA provider options under which a graph computes the numbers the exporter verified. ONNX Runtime's
# CUDA provider computes MatMul and Gemm in TF32 (a 10-bit mantissa) by default on Ampere and newer GPUs:
# measured on an H100, 0.147 raw (0.033 of a channel's std) off the CPU on the default model's forecasts,
# against 6.1e-5 with TF32 off, at no measurable speed cost for these models (docs/gpu.md). The service's
# CUDA sessions and the exporter's CUDA parity check both use these options.
CUDA_EXACT_OPTIONS = {"use_tf32": "0"}


def window_scale(
    windows: ArrayLike, statistic: str, rows: int, power: float, floor: ArrayLike, lag: int = 1
) -> np.ndarray:
    """The spread prediction-interval widths scale with (the manifest's `intervals.window_scale`,
    docs/artifacts.md): per series and channel, max(statistic of the window's last `rows` rows, floor) **
    power, as s [S, 1, C] float32 for raw windows [S, L, C]. `statistic` "std" (population) or
    "mean_abs_diff" (mean |x_t − x_t−lag|: lag 1, or a global model's period, its seasonal-naive error).
    A global model's window marks the steps before a short series' start NaN: those are left out (pairs
    `lag` apart with a missing end). Lag 1 where no pair `lag` apart is left (a short series, or `rows`
    <= `lag`); the floor where none at all. The one definition the service answers with and the exporter
    calibrates with; numpy is imported here, not at module level, so the contract stays import-free."""
    import numpy as np

    w = np.asarray(windows, dtype=np.float64)[:, -rows:]
    missing = np.isnan(w)
    if not missing.any():  # every wide model's window: all observed
        if statistic == "std":
            stat = w.std(axis=1)
        else:
            # rows <= lag (a global read-out of one period, L = 7 by day): no pair `lag` apart, so lag 1,
            # as for a short series below; until 2026-12-06 the floor, which made such a model's widths an
            # absolute 1e30 x 1e-30 whatever the series' scale (80% coverage 0.213, bench.unseen_daily)
            k = lag if rows > lag else 1
            stat = np.abs(w[:, k:] - w[:, :-k]).mean(axis=1) if rows > k else np.zeros(w[:, 0].shape)
    elif statistic == "std":
        n = (~missing).sum(axis=1)
        x = np.where(missing, 0.0, w)
        mean = x.sum(axis=1) / np.maximum(n, 1)
        stat = np.sqrt(np.where(missing, 0.0, (w - mean[:, None]) ** 2).sum(axis=1) / np.maximum(n, 1))
    else:
        stat = np.zeros(w[:, 0].shape)
        todo = np.ones(stat.shape, dtype=bool)
        for k in dict.fromkeys((lag, 1)):
            if rows <= k:
                continue
            d = np.abs(w[:, k:] - w[:, :-k])
            ok = ~np.isnan(d)
            pairs = ok.sum(axis=1)
            err = np.where(ok, d, 0.0).sum(axis=1) / np.maximum(pairs, 1)
            use = todo & (pairs > 0)
            stat[use], todo = err[use], todo & ~use
    s = np.maximum(stat, np.asarray(floor, dtype=np.float64))
    if power != 1.0:
        s = s**power
    return s[:, None, :].astype(np.float32)
