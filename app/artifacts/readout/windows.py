"""A read-out's windows and features: the windows a series holds (inputs, masks, targets; the last L
values of a history), each window's scale, and the features of a normalised window (the REM bank's last
rows, the last lags, the missing share; a covariate model's further features) and the forecast a
read-out's weights make of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.artifacts.covariates import CovariateLayout
from app.artifacts.readout.spec import FitSettings, Lift
from rsa_core.windows import tail_windows

# Below this mean |value| a window holds no value (all zeros, or values under float32's normal range): its
# scale falls back (to its whole mean |value|, then to 1) and it forecasts zeros. An absolute 1e-8 until
# 2026-12-06 read any series below it as zeros: 1e-12 times a seasonal series came back 12.8 of its own
# units off from pretrained-monthly (the service); every rule above this one is relative to the window.
TINY = 1e-30
# A window is still (`still_cycles`) where its seasonal-naive change is within this share of its mean
# |value|: a cycle sent as decimals repeats to about 1e-16 of itself, not exactly.
STILL_SHARE = 1e-8
# The most windows of one series a read-out is fitted on (`fit_ends`). Neighbouring windows of a long
# series share all but one value; a 5-minute series of 67,849 values (fpp3's bank_calls, zeros filled,
# period 288) took 928 s and 8.0 GB to train (`export.panel train`, 2026-12-07), every window of it read;
# 152 s and 1.5 GB with this cap, its validation MASE 0.3262 -> 0.3269. Above every series the benchmarks
# and tests train on (elecdemand's 17,520 half-hours, ETTh1's 17,420 hours).
MAX_FIT_WINDOWS = 32_768
# A float32 graph against the float64 read-out it was built from: |graph − model| at most this many times
# each window's scale or |model|, the larger (`scale_errors`): the exporter's parity checks and a
# published refit's. Against 1 + |model| until 2026-12-07, a forecast near zero from a window at level 25
# failed: fpp3's bank_calls (5-minute, L = 1728, 1,670 features with the random layer) missed by 2.0e-4
# there while within 2.3e-5 of its windows' scales; float32 sums of terms ~200 times the result's size
# lose that much.
PARITY_TOLERANCE = 1e-4
PARITY_UNIT = "each window's scale (the mean |value| of its last cycle) or the forecast, the larger"


def _means(v: np.ndarray, m: np.ndarray, period: int) -> tuple[np.ndarray, np.ndarray]:
    """Per window: the mean of `v` over its last cycle's observed steps, and over the whole window's."""
    last = max(period, 1)
    cycle = (v[:, -last:] * m[:, -last:]).sum(1) / np.maximum(m[:, -last:].sum(1), 1)
    return cycle, (v * m).sum(1) / np.maximum(m.sum(1), 1)


def _level(x: np.ndarray, m: np.ndarray, period: int) -> np.ndarray:
    """Per window: the mean |value| of its last cycle's observed steps, else of the whole window's (TINY
    or less: a window without a value)."""
    s, whole = _means(np.abs(x), m, period)
    return np.where(s > TINY, s, whole)


def _sign(x: np.ndarray, m: np.ndarray, period: int) -> np.ndarray:
    """Per window: -1 where the mean of its last cycle's observed values is below zero (of the whole
    window's where the last cycle has no |value| above TINY, as `_level` falls back), else 1."""
    level, _ = _means(np.abs(x), m, period)
    cycle, whole = _means(x, m, period)
    return np.where(np.where(level > TINY, cycle, whole) < 0, -1.0, 1.0)


def window_scales(x: np.ndarray, m: np.ndarray, period: int, mirror: bool = False) -> np.ndarray:
    """Per window: what its values are divided by, the mean |value| of its last cycle's observed steps
    (falling back to the whole window's, then to 1 for an all-zero window). With `mirror` (a read-out
    fitted on series that never went below zero: FitSettings.mirror) the scale of a window below zero is
    negative: the window is read as its mirror image above zero, and its forecast mirrored back."""
    s = _level(x, m, period)
    s = np.where(s > TINY, s, 1.0)
    return s * _sign(x, m, period) if mirror else s


def output_scales(x: np.ndarray, m: np.ndarray, period: int, mirror: bool = False) -> np.ndarray:
    """Per window: what a read-out's normalised forecast is multiplied by, `window_scales`' scale but 0
    for an all-zero window, which forecasts zeros. With its divisor of 1 the read-out's bias and random
    layer had been the forecast: 0.03-0.16 from pretrained-monthly for 120 zeros, -0.11-0.65 from
    pretrained-quarterly for 40 (the service, 2026-12-05). The ONNX graph's `scale_out` is the same."""
    s = _level(x, m, period)
    s = np.where(s > TINY, s, 0.0)
    return s * _sign(x, m, period) if mirror else s


def _naive(x: np.ndarray, m: np.ndarray, period: int) -> tuple[np.ndarray, np.ndarray]:
    """Per window: (the mean |x_t − x_{t−lag}| over its observed pairs, 0 where it has no pair at all;
    the lag: the period, or 1 where the window holds no observed pair a period apart)."""
    out, lags = np.zeros(len(x)), np.ones(len(x), dtype=np.int64)
    todo = np.ones(len(x), dtype=bool)
    for lag in (period, 1) if period > 1 else (1,):
        both = m[:, lag:] * m[:, :-lag]
        pairs = both.sum(1)
        err = (np.abs(x[:, lag:] - x[:, :-lag]) * both).sum(1) / np.maximum(pairs, 1)
        use = todo & (pairs > 0)
        out[use], lags[use], todo = err[use], lag, todo & ~use
    return out, lags


def naive_error(x: np.ndarray, m: np.ndarray, period: int) -> np.ndarray:
    """Per window: the mean |x_t − x_{t−m}| over its observed pairs (m = the period, or 1 where the
    window holds no observed pair a period apart); 0 where it has no pair at all."""
    return _naive(x, m, period)[0]


def still_cycles(x: np.ndarray, m: np.ndarray, period: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(still [n] bool, each window's last cycle repeated [n, horizon]) of raw windows x [n, L] (observed
    where m, from the first observed step on). Still: `naive_error`, the spread the service's intervals
    are in units of, within STILL_SHARE of the window's mean |value|; its lag is the cycle's length (a
    period, or 1 where no pair a period apart is observed)."""
    change, lags = _naive(x, m, period)
    still = change <= STILL_SHARE * (np.abs(x) * m).sum(1) / np.maximum(m.sum(1), 1)
    steps = np.arange(horizon)
    index = x.shape[1] - lags[:, None] + steps[None, :] % lags[:, None]  # [n, H]: the last cycle, repeated
    return still, np.take_along_axis(x, index, 1)


def hold_still(forecast: np.ndarray, x: np.ndarray, m: np.ndarray, period: int) -> np.ndarray:
    """A read-out's forecast [n, H] of raw windows x [n, L] (observed where m, from the first observed step
    on) with each still window's (`still_cycles`) its last cycle repeated. A constant series forecasts its
    value, a series of zeros zeros, a cycle repeated that cycle. The ridge maps a flat window near itself,
    not onto it: 3000 was forecast 3008-3039 by pretrained-quarterly and 3000.9-3001.1 by
    pretrained-monthly, with 80% intervals of no width around them (the service, 2026-12-05). The ONNX
    graph's `still` nodes are the same rule; a covariate model's forecast moves with its covariates and is
    left as it is. A hybrid's local half holds the same windows (app/artifacts/hybrid.py `LocalSpec.feed`)."""
    still, cycle = still_cycles(x, m, period, forecast.shape[1])
    return np.where(still[:, None], cycle, forecast) if still.any() else forecast


def raw_forecast(
    y: np.ndarray, x: np.ndarray, m: np.ndarray, period: int, covariates: bool, mirror: bool = False
) -> np.ndarray:
    """A normalised forecast y [n, H] (a read-out's or a network's) of raw windows x [n, L] on the raw
    scale: times `output_scales`, and, for a model without covariates, each still window's its last cycle
    (`hold_still`). The numpy forecast, the calibration's scores and the transformer's forecast."""
    raw = y * output_scales(x, m, period, mirror)[:, None]
    return raw if covariates else hold_still(raw, x, m, period)


def features(
    x: np.ndarray,
    m: np.ndarray,
    period: int,
    n_lags: int,
    kernels: np.ndarray,
    lift: Lift | None = None,
    mirror: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(features [n, F], scales [n]) of raw windows x [n, L] whose observed steps are m [n, L]: the REM
    bank's last rows, the last lags and the missing share, and a `lift`'s outputs of those after them
    (`mirror`: `window_scales`')."""
    s = window_scales(x, m, period, mirror)
    u = np.where(m > 0, x / s[:, None], 0.0)  # the masked start reads as 0 (its share is a feature)
    lags = u[:, -n_lags:]
    missing = 1.0 - m.mean(1, keepdims=True)
    f = np.concatenate([u @ kernels.T, lags, missing], 1)
    return (f if lift is None else np.concatenate([f, lift.apply(f)], 1)), s


def scale_errors(
    got: np.ndarray, want: np.ndarray, histories: Sequence[np.ndarray], length: int, period: int
) -> np.ndarray:
    """|got − want| [S, H] in units of the larger of each history's window scale over its last `length`
    values (the read-out's `window_scales`: the mean |value| of its last cycle, 1 for a window without a
    value) and |want| (a covariate model's forecast can lie far from its window's level), so that a check
    reads the same for a series at any level: the graphs' parity checks (the exporter's and a published
    refit's)."""
    x, m = last_windows(histories, length)
    return np.abs(got - want) / np.maximum(window_scales(x, m, period)[:, None], np.abs(want))


def covariate_features(
    layout: CovariateLayout, raw: np.ndarray, kernels: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    """A covariate model's further features [n, G] of its raw `covariates` rows [n, D] for windows of
    `scale` [n]: standardised by the training statistics (a missing past start read as the training
    mean), each past covariate through the target's REM kernels, and read relative to the window's scale
    or in the target's units (`layout.effect`)."""
    return layout.scaled_features(layout.standardise(raw) @ layout.readout_matrix(kernels), scale)


@dataclass(frozen=True)
class CovariateRows:
    """What a fit of a covariate model reads besides the series: the layout, and `rows(i, ends)`, series
    i's raw `covariates` rows [len(ends), D] of its windows whose input ends at `ends` (the exporter's
    export/covariates.py `series_covariate_rows`)."""

    layout: CovariateLayout
    rows: Callable[[int, np.ndarray], np.ndarray]


def last_windows(histories: Sequence[np.ndarray], length: int) -> tuple[np.ndarray, np.ndarray]:
    """The last `length` values of each history [S, L] and their mask, the missing start masked (and 0;
    the one window rule, rsa_core.windows)."""
    held = np.array([min(len(h), length) for h in histories], dtype=np.int64).reshape(-1, 1)
    m = (np.arange(length) >= length - held).astype(np.float64)
    return tail_windows(histories, length, before=0.0), m


def window_ends(n: int, horizon: int, history: int) -> np.ndarray:
    """Where each training window of a series of n values ends (its input is v[end − L : end]): every end
    from max(history, 1) whose H targets lie in the series. `series_windows` draws these windows, and a
    covariate model's rows are cut at the same ends."""
    return np.arange(max(history, 1), n - horizon + 1)


def fit_ends(n: int, horizon: int, history: int) -> np.ndarray:
    """The ends of the windows a read-out is fitted on (`window_ends`): every one up to
    MAX_FIT_WINDOWS, else every k-th counted back from the last, the fewest k that keeps at most that many."""
    ends = window_ends(n, horizon, history)
    if len(ends) <= MAX_FIT_WINDOWS:
        return ends
    step = -(-len(ends) // MAX_FIT_WINDOWS)
    return ends[::-1][::step][::-1]


def windows_at(
    v: np.ndarray, length: int, horizon: int, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The windows of one series whose inputs end at `ends` (`window_ends`' or some of them): inputs
    [n, L] (the start before the series masked), masks [n, L], targets [n, H]."""
    padded = np.concatenate([np.zeros(length), v])
    observed = np.concatenate([np.zeros(length), np.ones(len(v))])
    view = np.lib.stride_tricks.sliding_window_view
    x = view(padded, length)[ends]  # padded[end : end + L] = v[end - L : end]
    m = view(observed, length)[ends]
    t = view(v, horizon)[ends]
    return x, m, t


def series_windows(
    v: np.ndarray, length: int, horizon: int, history: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every window of one series whose input has at least `history` values and whose H targets lie in
    it: inputs [n, L] (the start before the series masked), masks [n, L], targets [n, H]. Window i's
    input ends after value max(history, 1) + i."""
    ends = window_ends(len(v), horizon, history)
    return windows_at(v, length, horizon, ends) if len(ends) else None


def forecast(
    weights: np.ndarray,
    histories: Sequence[np.ndarray],
    fit: FitSettings,
    kernels: np.ndarray,
    batch: int = 4096,
    layout: CovariateLayout | None = None,
    covariates: np.ndarray | None = None,
) -> np.ndarray:
    """The next H values [S, H] of each history (raw values, oldest first; shorter than L: masked at the
    start) by the read-out `weights` [F + 1, H]; a covariate model's `layout` with each history's raw
    `covariates` row [S, D]."""
    if (layout is None) != (covariates is None):
        raise ValueError("covariates are given to a model without them, or missing for one with them")
    length = kernels.shape[1]
    out = np.empty((len(histories), fit.horizon))
    for a in range(0, len(histories), batch):
        x, m = last_windows(histories[a : a + batch], length)
        f, s = features(x, m, fit.period, fit.n_lags, kernels, fit.lift, fit.mirror)
        if layout is not None and covariates is not None:
            f = np.concatenate([f, covariate_features(layout, covariates[a : a + batch], kernels, s)], 1)
        y = f @ weights[:-1] + weights[-1]
        out[a : a + len(x)] = raw_forecast(y, x, m, fit.period, layout is not None, fit.mirror)
    return out
