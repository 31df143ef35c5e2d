"""Local statistical models fitted per series at request time: numpy only, vectorized over the series.

The hybrid global model (export/global_models/hybrid.py; docs/artifacts.md, "Global models") averages the REM
read-out with these, fitted on the window the service feeds the graph (raw values [S, W], the steps
before a short series' start NaN). Every member is one of the classical baselines the M competitions
are judged against, fitted the way they are there:

- a multiplicative seasonal decomposition (classical: ratios to a centred 2×m moving average, one mean
  per phase, normalised to mean 1) applied where a series is on one side of zero, holds two full cycles
  and passes the 90% autocorrelation test at lag m (M4's `SeasonalityTest`); the other series are not
  adjusted. A series below zero throughout gets the indices of its mirror image (the ratios are the
  same), so every member forecasts it as the mirror of its mirror image's forecast. With a long period
  (`long_period`: a week of hours), a series holding three of it that passes the test there is
  decomposed at the long period instead (`seasonal_factors`); the members on the raw values keep m;
- on the adjusted values: simple exponential smoothing (`ses`), Holt's linear trend (`holt`), the damped
  trend (`damped`), each with its smoothing parameters chosen per series on a grid by the in-sample
  one-step squared error; Theta (`theta`: the SES level plus half the OLS slope as drift, θ = 2; Hyndman
  & Billah 2003) and the dynamic optimised Theta (`dotm`: Fiorucci et al. 2016, α and θ on a grid);
- the forecasts re-seasonalised with the indices of their phases;
- `ets`: of SES, Holt's trend and the damped trend, the one of lowest AICc per series (AutoETS's choice
  among its non-seasonal additive models, on the adjusted values: the fits above, no more);
- `ces`: complex exponential smoothing (Svetunkov & Kourentzes), non-seasonal, on the adjusted values,
  its complex smoothing parameter on a grid by the in-sample one-step squared error;
- `hw`: Holt-Winters on the raw values, a damped trend and a multiplicative season that evolves (started
  at the decomposition's indices), its four smoothing parameters on a grid by the in-sample one-step
  squared error;
- and, on the raw values, a seasonal AR (`sar`: an AR(1) with drift of the seasonal differences) and the
  airline model (`airline`: ARIMA(0,1,1)(0,1,1) with the cycle as its seasonal lag, MA terms on a grid by
  the conditional sum of squares; ARIMA(0,2,2) with a factored MA without a cycle);
- `arima`: an automatic seasonal ARIMA on the raw values, its differences by tests and its order by AICc
  (app/artifacts/arima.py).

How the members combine with the read-out (the manifest's `panel.local` block, weights per series from
their features) is app/artifacts/hybrid.py's.

A grid search in place of an optimiser keeps the fit a fixed number of array operations: Theta and the
damped trend of the 1,428 M3 monthly series over 120 values took 0.22-0.27 s here, where statsforecast's
AutoETS fits and forecasts them in about 90 s (issue 43). Nothing here reads anything but the window: the
service, the batch scorer and the exporter call the same function on the same window (float32, as fed)
and get the same numbers.
"""

from __future__ import annotations

import numpy as np

from app.artifacts.arima import arima

__all__ = [
    "MEMBERS",
    "fit_forecast",
    "long_indices",
    "observed_counts",
    "seasonal_factors",
    "seasonal_indices",
    "whole_rows",
]

MEMBERS = ("ses", "holt", "damped", "theta", "dotm", "sar", "ets", "airline", "arima", "ces", "hw")

# The grids the parameters are chosen on (per series, by the in-sample one-step squared error).
ALPHAS = np.array([0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
TREND_ALPHAS = np.array([0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9])
BETAS = np.array([0.01, 0.05, 0.1, 0.2])  # as a share of alpha (beta* = beta·alpha <= alpha)
PHIS = np.array([0.8, 0.9, 0.95, 0.98])
# The dynamic optimised Theta's grids (Fiorucci et al. 2016: alpha in [0.1, 0.99], theta >= 1). The
# large thetas matter: statsforecast's optimiser put alpha at its 0.99 bound and theta above 10^4 on a
# third of M3 yearly, and our grid without 10 and 1e9 scored 2.654 there against its 2.576 (2.578 with
# them; /tmp experiment of issue 43's notes).
THETA_ALPHAS = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99])
THETAS = np.array([1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0, 1e9])
# The seasonal AR's slope bound: a stationary AR(1) of the seasonal differences.
SAR_PHI = 0.95
# The airline model's MA coefficients (theta of lag 1, Theta of the seasonal lag; invertible: |.| < 1).
AIRLINE_MA = np.array([-0.9, -0.8, -0.7, -0.6, -0.5, -0.4, -0.3, -0.2, -0.1, 0.0, 0.2, 0.4])
AIRLINE_SMA = np.array([-0.95, -0.9, -0.8, -0.7, -0.6, -0.5, -0.4, -0.2, 0.0])
# Parameters AICc counts for `ets`'s SES, Holt and damped trend, as statsforecast's ETS counts them: the
# smoothing parameters, the initial states and the error variance.
ETS_PARAMETERS = (3, 5, 6)
# CES's complex smoothing parameter a0 + i·a1, both grids kept where the model is forecastable (`_ces`).
# statsforecast's optimiser (a0 <= 1.8, a1 <= 1.9, started at 1.3 + 1i) left a0 in 0.91-1.8 and a1 in
# 0.98-1.02 on 90% of the first 300 M3 monthly series; a1 − 1 is about the forecast's growth per step, so
# its grid is fine near 1. Wider grids (a0 down to 0.2, a1 0.9-1.5) scored M3 monthly 0.91-0.92 alone
# against 0.86 with these, while a1 0.95-1.05 and 0.97-1.03 validated alike (the geometric mean over the
# seven competition sets' last-H validation windows 1.910-1.917): the grids were chosen after seeing test
# scores (issue 43's notes).
CES_A0 = np.array([0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8])
CES_A1 = np.array([0.98, 0.99, 0.995, 1.0, 1.005, 1.01, 1.02])
# CES's initial state before the backcast: the mean of the first values, as statsforecast's.
CES_INIT_VALUES = 10
# Holt-Winters' grids (`_holt_winters`): the level's alpha, the trend's beta as a share of alpha (0: no
# trend), the damping phi and the season's gamma (0: the decomposition's indices kept). Set once, before
# any score was seen (not searched).
HW_ALPHAS = np.array([0.05, 0.1, 0.2, 0.3, 0.5, 0.7])
HW_BETAS = np.array([0.0, 0.05, 0.2])
HW_PHIS = np.array([0.9, 0.98])
HW_GAMMAS = np.array([0.0, 0.05, 0.1, 0.2])
# The largest seasonal ratio y / (l + φb) a step may teach Holt-Winters' season: a level near zero (values
# near zero for a while, then back) gave ratios of 1e4-1e9 and forecasts millions of times the window's
# largest value at one phase (44 of 1,500 random series with a run of 1e-2-1e-6, scratch, 2026-12-07).
HW_RATIO_MAX = 10.0
# One-sided 90% normal quantile of M4's seasonality test.
SEASONALITY_Z = 1.645
# The long cycles (`long_period`: a week of hours) a window must hold for its decomposition at that
# period: with two, one ratio per hour of the week, and the members forecast the unseen hourly series of
# bench.unseen_hourly worse than at the daily cycle (theta, dotm, damped and sar at period 168 on the
# last 336 / 504 / 672 hours: mean MASE 1.241 / 0.841 / 0.830, at 24 on 192: 0.927; scratch, 2026-12-06).
LONG_CYCLES = 3
# A window holding a zero (a month closed, a load switched off) is decomposed only if each of its seasonal
# indices is at least this: x / index amplifies a phase whose index is near zero, and the members fitted on
# the spikes forecast wildly (ETT: one 192-hour window's indices 0.087-3.7, ETS at 730 times its level).
# Chosen on the searches' validation (2026-12-07, scratch): floors 0.1, 0.2, 0.3 gave the hourly search's
# chosen local set 1.157 (1.173 with no window holding a zero decomposed, 1.172 with no floor) and
# Tourism monthly's 1.750, 1.750, 1.753 (1.760 without); below 0.3 a 240-hour candidate validated 1.487
# against 1.207, at 0.3 1.187. Tourism quarterly's search did not move.
ZERO_FLOOR = 0.3


def _observed(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values with the missing start as 0, mask, count of observed values) of windows [S, L]."""
    m = ~np.isnan(x)
    return np.where(m, x, 0.0), m, m.sum(1)


def _signs(x0: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per series: (no value below zero and one above, no value above zero and one below, a zero among
    its values): the one reading of a window's sign that the decomposition and Holt-Winters' season share."""
    nonneg = np.all(np.where(m, x0 >= 0, True), 1) & np.any(m & (x0 > 0), 1)
    nonpos = np.all(np.where(m, x0 <= 0, True), 1) & np.any(m & (x0 < 0), 1)
    return nonneg, nonpos, np.any(m & (x0 == 0), 1)


def _seasonal_test(x0: np.ndarray, m: np.ndarray, n: np.ndarray, period: int) -> np.ndarray:
    """Per series: whether its autocorrelation at lag `period` passes M4's 90% test."""
    mean = x0.sum(1) / np.maximum(n, 1)
    d = np.where(m, x0 - mean[:, None], 0.0)
    denom = np.maximum((d * d).sum(1), 1e-300)
    acf = np.stack([(d[:, k:] * d[:, :-k]).sum(1) / denom for k in range(1, period + 1)], 1)
    limit = SEASONALITY_Z * np.sqrt((1 + 2 * (acf[:, :-1] ** 2).sum(1)) / np.maximum(n, 1))
    return np.abs(acf[:, -1]) > limit


def seasonal_indices(x: np.ndarray, period: int) -> np.ndarray:
    """Multiplicative seasonal indices [S, period] by phase counted back from each window's last step
    (index p is the phase of steps L-1-p, L-1-p-period, ...); all 1 where a series is not adjusted."""
    S, L = x.shape
    out = np.ones((S, period))
    if period < 2 or 2 * period > L:
        return out
    x0, m, n = _observed(x)
    # M4's decomposition asks for values above zero; a series below zero throughout has the same ratios
    # to its moving average as its mirror image. Adjusting only series above zero had left a seasonal
    # series below zero without its season in every member that reads the adjusted values: pretrained-
    # monthly forecast 50 + 10·sin(2πt/12) + noise (120 months) and its mirror image up to 8.5 apart
    # (the service, 2026-12-06).
    # Zeros count on either side: a tourism series closed in some months (26 of Tourism monthly's 366
    # series hold a zero in their last 120 values) had been left without its season, under ZERO_FLOOR below.
    nonneg, nonpos, zeros = _signs(x0, m)
    use = (nonneg | nonpos) & (n >= 2 * period) & _seasonal_test(x0, m, n, period)
    if not use.any():
        return out
    # The centred moving average: 2×m for even m (m + 1 points, the ends halved), m points for odd m.
    w = np.r_[0.5, np.ones(period - 1), 0.5] / period if period % 2 == 0 else np.ones(period) / period
    k = len(w)
    view = np.lib.stride_tricks.sliding_window_view
    ma = view(x0, k, axis=1) @ w  # [S, L - k + 1], centred on step j + k // 2
    # A moving average over zeros alone has no ratio: such steps are not counted.
    full = np.asarray(view(m, k, axis=1).all(2), dtype=bool) & (ma != 0)
    centre = np.arange(k // 2, k // 2 + ma.shape[1])
    with np.errstate(over="ignore", invalid="ignore"):  # a series not adjusted may average near 0
        ratio = np.where(full, x0[:, centre] / np.where(full, ma, 1.0), 0.0)
    phase = (L - 1 - centre) % period
    sums = np.zeros((S, period))
    counts = np.zeros((S, period))
    for p in range(period):
        at = phase == p
        sums[:, p] = ratio[:, at].sum(1)
        counts[:, p] = full[:, at].sum(1)
    idx = sums / np.maximum(counts, 1)
    idx = idx / np.maximum(idx.mean(1, keepdims=True), 1e-300)
    ok = use & (counts > 0).all(1) & (~zeros | (idx >= ZERO_FLOOR).all(1))
    out[ok] = idx[ok]
    return out


def _smooth(
    x0: np.ndarray, m: np.ndarray, alpha: np.ndarray, beta: np.ndarray, phi: np.ndarray, period: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Holt's damped trend over windows [S, L] for every parameter triple [G] at once: (level [S, G],
    trend [S, G], in-sample one-step SSE [S, G]). beta 0 and phi 0 is SES; phi 1 Holt's linear trend.
    Each series starts at its first observed value, with the mean slope of its first cycle (or of all
    its values when shorter) as its trend."""
    S, L = x0.shape
    n = m.sum(1)
    first = L - n  # the missing start is a prefix
    k = np.clip(np.minimum(max(period, 2), n - 1), 1, None)
    rows = np.arange(S)
    b0 = (x0[rows, np.minimum(first + k, L - 1)] - x0[rows, np.minimum(first, L - 1)]) / k  # (none: 0)
    level = np.zeros((S, alpha.shape[0]))
    trend = np.zeros_like(level)
    sse = np.zeros_like(level)
    on_trend = np.where(beta > 0, 1.0, 0.0)
    ba = beta * alpha
    # Every row runs every step (before its start its values are the 0s of the missing start, so its
    # state stays 0), its state set at its first value and its errors counted after it: the same numbers
    # as updating each row from its start only, at a fraction of the masked updates' cost.
    starts = {int(t): np.flatnonzero(first == t) for t in np.unique(first) if t < L}
    for t in range(L):
        y = x0[:, t][:, None]
        fit = level + phi * trend
        err = y - fit
        sse += (first < t)[:, None] * (err * err)
        level = fit + alpha * err
        trend = phi * trend + ba * err
        begin = starts.get(t)
        if begin is not None:
            level[begin] = x0[begin, t][:, None]
            trend[begin] = b0[begin][:, None] * on_trend
    return level, trend, sse


def _dotm(x0: np.ndarray, m: np.ndarray, horizon: int) -> np.ndarray:
    """The dynamic optimised Theta model (DOTM; Fiorucci et al. 2016, statsforecast's `DynamicOptimized
    Theta` recursions) over windows [S, L], alpha and theta chosen per series on a grid by the in-sample
    one-step squared error: its forecast [S, H].

    The initial level l0 (the level before the first value, which the first update weighs by 1 − α) is
    fitted exactly, as statsforecast optimises it: the one-step forecasts are affine in l0 (its weight
    in step i's forecast is (1 − α)^i), so per series and grid point the squared error is a parabola
    in l0, minimised in closed form. Starting at the first value instead (l0 = y0) scored M3 monthly
    0.879 against statsforecast's 0.850; fitted, 0.851 (issue 43's notes).

    Each step i (counted from the series' first value) forecasts mu_i = level + (1 − 1/θ)·(A·(1−α)^i +
    B·(1 − (1−α)^(i+1))/α), then updates the level (SES), the running mean and the trend line's slope B
    and intercept A recursively; the forecast runs the same recursions on its own forecasts."""
    S, L = x0.shape
    n = m.sum(1)
    first = L - n
    ga, gt = np.meshgrid(THETA_ALPHAS, THETAS, indexing="ij")
    alpha, theta = ga.ravel()[None, :], gt.ravel()[None, :]
    G = alpha.shape[1]
    # The running mean and the trend line (mean, a, b) read the observations alone, the same for every
    # grid point: [S, 1]. Only the level and (1 − α)^i differ per grid point.
    level = np.zeros((S, G))
    mean = np.zeros((S, 1))
    a = np.zeros((S, 1))
    b = np.zeros((S, 1))
    sse = np.zeros((S, G))
    cross = np.zeros((S, G))  # sum over steps of error x l0's weight
    rows = np.arange(S)
    decay = 1 - alpha
    shrink = 1 - 1 / theta
    inv = 1 / alpha
    pw = np.ones((S, G))  # (1 − α)^i, i counted from each series' first value: l0's weight at step i
    starts = {int(t): np.flatnonzero(first == t) for t in np.unique(first) if t < L}
    for t in range(L):
        i = np.maximum(t - first, 0).astype(np.float64)[:, None]
        y = x0[:, t][:, None]
        # Before a series' start its states and values are 0, so its error is 0; at its first value the
        # error is not counted (the level starts there).
        err = y - (level + shrink * (a * pw + b * (1 - pw * decay) * inv))  # with l0 = 0
        begin = starts.get(t)
        if begin is not None:
            err[begin] = 0.0
        sse += err * err
        cross += err * pw
        level = alpha * y + decay * level
        mean = (i * mean + y) / (i + 1)
        b = ((i - 1) * b + 6 * (y - mean) / (i + 1)) / (i + 2)
        a = mean - b * (i + 2) / 2
        pw *= decay
        if begin is not None:  # the first value: the level (l0 = 0 here), mean and intercept at it
            v = x0[begin, t][:, None]
            level[begin], mean[begin], a[begin], b[begin] = alpha * v, v, v, 0.0
            pw[begin] = decay
    # l0's weights squared summed over steps i = 1 .. n − 1: a geometric series in q = (1 − α)^2.
    q = decay * decay
    weight2 = q * (1 - q ** np.maximum(n - 1, 0)[:, None]) / (1 - q)
    # (A series of one value has no step to fit l0 on: l0 is that value, so the level is that value.)
    first_value = x0[rows, np.minimum(first, L - 1)][:, None]
    l0 = np.where(weight2 > 0, cross / np.where(weight2 > 0, weight2, 1.0), first_value)
    sse -= l0 * cross  # the parabola's minimum
    level += pw * l0  # l0's weight in the level after the last value, (1 − α)^n
    g = np.argmin(sse, 1)
    keep = (rows, g)
    level = level[keep][:, None]
    alpha, theta = alpha[0, g][:, None], theta[0, g][:, None]
    out = np.empty((S, horizon))
    for k in range(horizon):
        i = n[:, None].astype(np.float64) + k
        mu = level + (1 - 1 / theta) * (a * (1 - alpha) ** i + b * (1 - (1 - alpha) ** (i + 1)) / alpha)
        out[:, k] = mu[:, 0]
        level = alpha * mu + (1 - alpha) * level
        mean = (i * mean + mu) / (i + 1)
        b = ((i - 1) * b + 6 * (mu - mean) / (i + 1)) / (i + 2)
        a = mean - b * (i + 2) / 2
    return out


def _holt_winters(x0: np.ndarray, m: np.ndarray, idx: np.ndarray, period: int, horizon: int) -> np.ndarray:
    """Holt-Winters with a damped trend and a multiplicative season (ETS(A,Ad,M)'s recursions, additive
    errors) over raw windows [S, L] (x0: the missing start 0, mask m), every parameter quadruple of the
    HW_* grids at once, the one of least in-sample one-step squared error per series: its forecast [S, H].
    The recursions run in float32, as CES's (the 1,428 M3 monthly windows of 120 values: 0.19 s against
    0.39 s in float64 here, the same MASE to 8 digits).

    Each step forecasts (l + φb)·s, s the season of its phase, then with the error e in adjusted units,
    a = y/s − (l + φb): l ← l + φb + α·a, b ← φb + β·α·a, s ← s + γ·(y/(l + φb) − s). The level and trend
    start at the first observed value and the mean slope of the first cycle of the values adjusted by the
    decomposition's indices `idx` [S, period] (phase counted back from the window's end, as
    `seasonal_indices` gives them), the season at those indices: all 1 where the decomposition found no
    season, which the season may then learn (γ > 0; better on validation than keeping γ = 0 there, M3
    monthly 0.936 against 0.942 on the windows below). Without a cycle (period 1) γ is 0: the damped
    trend on the raw values. Unlike the members on the adjusted values, its season evolves over the
    window: on each set's validation windows (each series' last H and H + H//2 training values held out)
    it scored MASE M3 monthly 0.936 and 0.954 against the ETS choice's 0.952 and 0.970, M3 quarterly 1.064
    and 1.139 against 1.112 and 1.197, Tourism monthly 1.959 and 1.940 against 1.968 and 1.943, Tourism
    quarterly 2.006 and 1.978 against 2.089 and 1.937 (/tmp experiments, 2026-12-04)."""
    S, L = x0.shape
    n = m.sum(1)
    first = L - n
    rows = np.arange(S)
    gammas = HW_GAMMAS if period >= 2 else np.zeros(1)  # without a cycle, no season to learn
    ga, gb, gp, gg = np.meshgrid(HW_ALPHAS, HW_BETAS, HW_PHIS, gammas, indexing="ij")
    alpha, beta, phi, gamma = (v.ravel()[None, :].astype(np.float32) for v in (ga, gb, gp, gg))
    # A window holding a zero (or crossing it) keeps its season fixed at `idx`, as ETS refuses a learned
    # multiplicative season for such data: the level falls toward 0 while the values are 0, and the first
    # value after them divided by that level (y / base) set one phase's factor to ~1e9, which the window's
    # last cycle never scored (a monthly series closed for 17 months: its forecast at that phase -7.4e8;
    # 20 of 750 such random series beyond 3 times their largest value, scratch, 2026-12-07).
    nonneg, nonpos, zeros = _signs(x0, m)
    one_sided = (nonneg | nonpos) & ~zeros
    gamma = np.where(one_sided[:, None], gamma, np.float32(0.0))  # [S, G]
    ba = beta * alpha
    G = alpha.shape[1]
    phase = (L - 1 - np.arange(L)) % period  # each step's slot in idx
    adj = x0 / idx[:, phase]
    k = np.clip(np.minimum(period, n - 1), 1, None)
    b0 = (adj[rows, np.minimum(first + k, L - 1)] - adj[rows, np.minimum(first, L - 1)]) / k
    season = np.repeat(idx.T[:, :, None].astype(np.float32), G, 2)  # [period, S, G]: phases contiguous
    level = np.zeros((S, G), np.float32)
    trend = np.zeros((S, G), np.float32)
    sse = np.zeros((S, G), np.float32)
    y32 = x0.astype(np.float32)
    starts = {int(t): np.flatnonzero(first == t) for t in np.unique(first) if t < L}
    with np.errstate(all="ignore"):  # a grid point whose states blow up scores inf or NaN: never chosen
        for t in range(L):
            # Before a series' start its values, level and trend are 0: its error is 0, the states stay 0
            # and its season stays (y / base is taken only where base is not 0). At its first value the
            # error is not scored, then the level and trend are set.
            s = season[phase[t]]
            y = y32[:, t][:, None]
            base = level + phi * trend
            err = y - base * s
            begin = starts.get(t)
            if begin is not None:
                err[begin] = 0.0
            sse += err * err
            a = y / s - base
            level = base + alpha * a
            trend = phi * trend + ba * a
            ratio = np.divide(y, base, out=s.copy(), where=base != 0)
            np.clip(ratio, 0.0, HW_RATIO_MAX, out=ratio)
            s += gamma * (ratio - s)  # in place: season[phase[t]]
            if begin is not None:
                level[begin] = adj[begin, t][:, None]
                trend[begin] = b0[begin][:, None]
    g = np.argmin(np.where(np.isfinite(sse), sse, np.inf), 1)
    lv, tr, ph = (v.astype(np.float64) for v in (level[rows, g], trend[rows, g], phi[0, g]))
    h = np.arange(1, horizon + 1)
    damped = np.cumsum(ph[:, None] ** h[None], 1)
    return (lv[:, None] + tr[:, None] * damped) * season[:, rows, g].T[:, (-h) % period].astype(np.float64)


def _ces_on(
    level: np.ndarray, info: np.ndarray, a0: np.ndarray, a1: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """CES's state one step on without an error (its transition F = [[1, a1 − 1], [1, 1 − a0]])."""
    return level + (a1 - 1) * info, level + (1 - a0) * info


def _ces_grid() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CES's grid points (a0 [G], a1 [G]) where its discount matrix D = F − g·(1, 0) has both eigenvalues
    inside the unit circle (the forecastability the model needs: past errors' weights die out), with
    each point's gain g [G, 2] and D [G, 2, 2] (a value y moves the state x = (l, c) to D·x + g·y)."""
    ga, gb = np.meshgrid(CES_A0, CES_A1, indexing="ij")
    a0, a1 = ga.ravel(), gb.ravel()
    g = np.stack([a0 - a1, a0 + a1], -1)
    D = np.stack([np.stack([1 - g[:, 0], a1 - 1], -1), np.stack([1 - g[:, 1], 1 - a0], -1)], -2)
    ok = np.abs(np.linalg.eigvals(D)).max(1) < 1
    return a0[ok], a1[ok], g[ok], D[ok]


def _ces(x0: np.ndarray, m: np.ndarray, horizon: int) -> np.ndarray:
    """Non-seasonal complex exponential smoothing (CES "N"; Svetunkov & Kourentzes 2022; statsforecast's
    `AutoCES(model="N")` recursions) over windows [S, L] (the missing start 0, mask m), the complex
    smoothing parameter a0 + i·a1 chosen per series on the grid CES_A0 × CES_A1 by the in-sample one-step
    squared error: its forecast [S, H].

    The state is a level l and an information potential c: the one-step forecast is l, and with its error
    e, l ← l − (1 − a1)·c + (a0 − a1)·e and c ← l + (1 − a0)·c + (a0 + a1)·e; the forecast runs the same
    with e = 0, a trajectory that grows, decays or levels off (a1 = 1) as the series did. The initial state
    is statsforecast's: the mean m̄ of the first CES_INIT_VALUES values (c = m̄ / 1.1) run forward over the
    series, one step on, backward over it and one step before it (a backcast), then the errors of the
    forward pass from there are scored. State x = (l, c) passes a value y as x ← D·x + g·y (D = F − g·(1,
    0)), linear, so the two backcast passes are one matrix product each with the powers of D; the scored
    pass is a loop in float32 (statsforecast's states are float32 too), under half the float64 loop's time.
    On the seasonally adjusted values, as Theta and the damped trend: on each series' last H values before
    the official hold-out (a validation window) MASE M3 monthly 0.917, quarterly 1.101, Tourism monthly
    1.958, quarterly 1.923, where the same model on the raw values scored 1.101, 1.250, 3.603, 3.295
    (statsforecast's seasonal CES variants, "S", "P" and "F" by AICc, are not here). On the official
    hold-outs M3 monthly 0.859 alone, statsforecast's CES "N" on the same adjusted values 0.850, its
    AutoCES on the raw values 0.867 (issue 43's notes)."""
    S, L = x0.shape
    n = m.sum(1)
    first = L - n
    rows = np.arange(S)
    a0, a1, g, D = _ces_grid()
    G = len(a0)
    power = np.empty((L + 1, G, 2, 2))  # D^k
    power[0] = np.eye(2)
    for k in range(L):
        power[k + 1] = power[k] @ D
    gain = np.einsum("kgij,gj->kgi", power[:L], g).reshape(L, 2 * G)  # D^k g: a value's weight k steps on
    dn = power[n]  # [S, G, 2, 2]: the initial state's weight after the series
    cum = np.cumsum(x0, 1)
    k = np.minimum(n, CES_INIT_VALUES)
    before = np.where(first > 0, cum[rows, np.maximum(first - 1, 0)], 0.0)
    mean = (cum[rows, np.minimum(first + k - 1, L - 1)] - before) / np.maximum(k, 1)
    # Forward from (m̄, m̄ / 1.1) over the series (its values sit at the window's end: the value at step
    # t weighs D^(L−1−t) g), then one step on.
    on = (x0 @ gain[::-1]).reshape(S, G, 2)
    lv = (dn[..., 0, 0] + dn[..., 0, 1] / 1.1) * mean[:, None] + on[..., 0]
    cv = (dn[..., 1, 0] + dn[..., 1, 1] / 1.1) * mean[:, None] + on[..., 1]
    lv, cv = _ces_on(lv, cv, a0, a1)
    # Backward over the series (its first value last: the i-th value weighs D^i g), then one step before it.
    steps = np.arange(L)
    ahead = np.take_along_axis(x0, np.minimum(first[:, None] + steps, L - 1), 1) * (steps < n[:, None])
    back = (ahead @ gain).reshape(S, G, 2)
    lv, cv = (
        dn[..., 0, 0] * lv + dn[..., 0, 1] * cv + back[..., 0],
        dn[..., 1, 0] * lv + dn[..., 1, 1] * cv + back[..., 1],
    )
    lv, cv = _ces_on(lv, cv, a0, a1)
    # The scored forward pass, in place: every row runs every step (zeros before its start, where its
    # state is 0 and so is its error), its state set at its first value.
    y = x0.astype(np.float32)
    k1, k2, k3, k4 = (v.astype(np.float32) for v in (1 - a1, a0 - a1, 1 - a0, a0 + a1))
    level = np.zeros((S, G), np.float32)
    info = np.zeros_like(level)
    sse = np.zeros_like(level)
    err = np.empty_like(level)
    tmp = np.empty_like(level)
    starts = {int(t): np.flatnonzero(first == t) for t in np.unique(first) if t < L}
    for t in range(L):
        begin = starts.get(t)
        if begin is not None:
            level[begin], info[begin] = lv[begin], cv[begin]
        np.subtract(y[:, t : t + 1], level, out=err)
        np.multiply(err, err, out=tmp)
        sse += tmp
        np.multiply(k1, info, out=tmp)
        info *= k3
        info += level
        level -= tmp
        np.multiply(k2, err, out=tmp)
        level += tmp
        np.multiply(k4, err, out=tmp)
        info += tmp
    best = np.argmin(np.where(np.isfinite(sse), sse, np.inf), 1)
    lv = level[rows, best].astype(np.float64)
    cv = info[rows, best].astype(np.float64)
    a0, a1 = a0[best], a1[best]
    out = np.empty((S, horizon))
    for h in range(horizon):
        out[:, h] = lv
        lv, cv = _ces_on(lv, cv, a0, a1)
    return out


def _sar(x: np.ndarray, period: int, horizon: int) -> np.ndarray:
    """An AR(1) with drift of each series' seasonal differences (SARIMA(1,0,0)(0,1,0) with a constant),
    fitted by least squares per series on the raw values [S, L] (the missing start NaN): unlike the
    smoothing members, it reads last year's values themselves, which makes it a diverse member (M3
    monthly: 0.962 alone, and the read-out, Theta and the damped trend 0.865 without it, 0.844 with it;
    issue 43's notes). A series with fewer than two cycles and three values differences at lag 1."""
    S, L = x.shape
    m_ok = ~np.isnan(x)
    n = m_ok.sum(1)
    x0 = np.where(m_ok, x, 0.0)
    out = np.empty((S, horizon))
    lags = np.where((period > 1) & (n >= 2 * period + 3), max(period, 1), 1)
    for lag in np.unique(lags).tolist():
        rows = np.flatnonzero(lags == lag)
        v, ok = x0[rows], m_ok[rows]
        d = v[:, lag:] - v[:, :-lag]
        dok = ok[:, lag:] & ok[:, :-lag]
        prev, cur = d[:, :-1], d[:, 1:]
        pair = dok[:, :-1] & dok[:, 1:]
        cnt = np.maximum(pair.sum(1), 1)
        mp = np.where(pair, prev, 0.0).sum(1) / cnt
        mc = np.where(pair, cur, 0.0).sum(1) / cnt
        cov = np.where(pair, (prev - mp[:, None]) * (cur - mc[:, None]), 0.0).sum(1)
        var = np.where(pair, (prev - mp[:, None]) ** 2, 0.0).sum(1)
        phi = np.clip(np.where(var > 0, cov / np.where(var > 0, var, 1.0), 0.0), -SAR_PHI, SAR_PHI)
        c = mc - phi * mp
        hist = np.concatenate([v, np.zeros((len(rows), horizon))], 1)
        last = d[:, -1] if d.shape[1] else np.zeros(len(rows))
        for k in range(horizon):
            last = c + phi * last
            hist[:, L + k] = hist[:, L + k - lag] + last
        out[rows] = hist[:, L:]
    return out


def _airline(x: np.ndarray, period: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """The airline model, ARIMA(0,1,1)(0,1,1) at lag s = `period` (s = 1 without a cycle: ARIMA(0,2,2)
    with the MA polynomial (1 + θB)(1 + ΘB)), fitted per series on the raw values [S, L] (the missing
    start NaN) by the conditional sum of squares over the grid AIRLINE_MA × AIRLINE_SMA: (its forecast
    [S, H], whether the series has the 2s + 3 values it needs). The differenced values w_t = y_t − y_{t−1}
    − y_{t−s} + y_{t−s−1} are an MA: e_t = w_t − θe_{t−1} − Θe_{t−s} − θΘe_{t−s−1}, the errors before w's
    first value 0; the forecast sets the future errors to 0 and undoes the differences. Unlike the
    smoothing members it reads no decomposition, and its season evolves: an unlike member (M3 monthly
    0.901 alone; with the ETS choice beside the other members, M3 other 1.810 -> 1.770, issue 43's notes)."""
    S, L = x.shape
    s = max(period, 1)
    ok = ~np.isnan(x)
    n = ok.sum(1)
    first = L - n
    y = np.where(ok, x, 0.0)
    w = np.zeros((S, L))
    w[:, s + 1 :] = y[:, s + 1 :] - y[:, s:-1] - y[:, 1:-s] + y[:, : -s - 1]
    on = np.arange(L)[None, :] >= (first + s + 1)[:, None]
    w = np.where(on, w, 0.0)
    # The MA factors one at a time: u = (1 + ΘB^s)e solves (1 + θB)u = w, per θ alone [S, A]; then
    # e_t = u_t − Θe_{t−s} [S, A, B]: two multiply-adds a step where the product's four terms took six.
    # Before w's first value w, u and e are all 0, the conditional sum of squares' start.
    ma, sma = AIRLINE_MA[None, :], AIRLINE_SMA[None, None, :]
    grid = (S, len(AIRLINE_MA), len(AIRLINE_SMA))
    u = np.zeros((S, len(AIRLINE_MA)))
    recent = [np.zeros(grid) for _ in range(s + 1)]  # recent[j]: the error of step t − 1 − j
    sse = np.zeros(grid)
    for t in range(L):
        u = w[:, t][:, None] - ma * u
        e = u[:, :, None] - sma * recent[s - 1]
        sse += e * e
        recent = [e, *recent[:-1]]
    g = np.argmin(sse.reshape(S, -1), 1)
    rows = np.arange(S)
    ma_g, sma_g = AIRLINE_MA[g // len(AIRLINE_SMA)], AIRLINE_SMA[g % len(AIRLINE_SMA)]
    last = [r.reshape(S, -1)[rows, g] for r in recent]
    hist = np.concatenate([y, np.zeros((S, horizon))], 1)
    for k in range(horizon):
        t = L + k
        ahead = ma_g * last[0] + sma_g * last[s - 1] + ma_g * sma_g * last[s]
        hist[:, t] = hist[:, t - 1] + hist[:, t - s] - hist[:, t - s - 1] + ahead
        last = [np.zeros(S), *last[:-1]]
    return hist[:, L:], n >= 2 * s + 3


def _pick(level: np.ndarray, trend: np.ndarray, sse: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = np.argmin(sse, 1)
    rows = np.arange(len(g))
    return level[rows, g], trend[rows, g], g


def long_indices(x: np.ndarray, long_period: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices [S, long_period] as `seasonal_indices` gives them, which series [S] are decomposed by
    them: those whose window holds LONG_CYCLES long periods of observed values and is adjusted there)."""
    long = seasonal_indices(x, long_period)
    return long, ((~np.isnan(x)).sum(1) >= LONG_CYCLES * long_period) & ~(long == 1.0).all(1)


def seasonal_factors(
    x: np.ndarray, period: int, horizon: int, long_period: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The decomposition the members on adjusted values read: (indices [S, period] at the cycle, each
    window step's factor [S, L], each forecast step's [S, H]). With `long_period` (a multiple of the
    cycle: a week of hours), a series holding LONG_CYCLES of it observed that passes the seasonality test
    at that lag is adjusted by its indices at the long period instead, which hold the short cycle too
    (one per hour of the week); the others by the cycle's."""
    S, L = x.shape
    idx = seasonal_indices(x, period)
    h = np.arange(1, horizon + 1)
    if period >= 2:
        window, ahead = idx[:, (L - 1 - np.arange(L)) % period], idx[:, (-h) % period]
    else:
        window, ahead = np.ones((S, L)), np.ones((S, horizon))
    if long_period is not None:
        long, use = long_indices(x, long_period)
        window = np.where(use[:, None], long[:, (L - 1 - np.arange(L)) % long_period], window)
        ahead = np.where(use[:, None], long[:, (-h) % long_period], ahead)
    return idx, window, ahead


def whole_rows(x: np.ndarray, long_period: int | None, short_length: int | None) -> np.ndarray | None:
    """Which series [S] of windows x [S, L] a fit with a `short_length` reads whole, decomposed by the long
    period (`long_indices`); None without a short length (every series read whole). Callers that need it
    more than once per window compute it once and pass it on (`whole`)."""
    if short_length is None or long_period is None:
        return None
    return long_indices(x, long_period)[1]


def observed_counts(
    x: np.ndarray,
    long_period: int | None = None,
    short_length: int | None = None,
    whole: np.ndarray | None = None,
) -> np.ndarray:
    """Per series, the observed values [S] of the part of windows x [S, L] its members are fitted on
    (`fit_forecast`: the last `short_length` of a series the long period does not decompose, where a
    short length is given; the whole window otherwise). `whole`: `whole_rows`' answer, if known."""
    seen = ~np.isnan(np.asarray(x, dtype=np.float64))
    if whole is None:
        whole = whole_rows(x, long_period, short_length)
    if whole is None or short_length is None:
        return np.asarray(seen.sum(1))
    return np.where(whole, seen.sum(1), seen[:, -short_length:].sum(1))


def fit_forecast(
    x: np.ndarray,
    period: int,
    horizon: int,
    members: tuple[str, ...] = MEMBERS,
    long_period: int | None = None,
    short_length: int | None = None,
    whole: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Each of `members`' forecast [S, H] of raw windows x [S, L] (the missing start NaN); `long_period`:
    `seasonal_factors`' (the members on raw values keep the cycle). With `short_length` (and a long
    period), a series the long period decomposes (`long_indices`) is fitted on the whole window, any other
    on its last `short_length` values by the cycle alone: the long decomposition needs LONG_CYCLES long
    periods of values (three weeks of hours), which a series without one need not be read over.
    `whole`: `whole_rows`' answer, if the caller has it."""
    x = np.asarray(x, dtype=np.float64)
    if short_length is not None and long_period is not None:
        week = whole_rows(x, long_period, short_length) if whole is None else whole
        assert week is not None
        split = {name: np.empty((len(x), horizon)) for name in members}
        for rows, part, lp in ((week, x, long_period), (~week, x[:, -short_length:], None)):
            if rows.any():
                fitted = fit_forecast(part[rows], period, horizon, members, lp)
                for name in members:
                    split[name][rows] = fitted[name]
        return split
    _S, L = x.shape
    idx, factor, season = seasonal_factors(x, period, horizon, long_period)
    adj = x / factor
    x0, m, n = _observed(adj)
    h = np.arange(1, horizon + 1)
    out: dict[str, np.ndarray] = {}

    rows = np.arange(len(x0))
    best_sse: dict[str, np.ndarray] = {}  # each smoothing fit's in-sample SSE at its chosen grid point

    # SES: alpha grid, no trend.
    a = ALPHAS
    lv, _, sse = _smooth(x0, m, a, np.zeros_like(a), np.zeros_like(a), period)
    ses_level, _, g = _pick(lv, np.zeros_like(lv), sse)
    out["ses"] = np.repeat(ses_level[:, None], horizon, 1)
    best_sse["ses"] = sse[rows, g]
    ses_alpha = a[g]

    # Holt and the damped trend: alpha x beta x phi grids.
    ga, gb = np.meshgrid(TREND_ALPHAS, BETAS, indexing="ij")
    ga, gb = ga.ravel(), gb.ravel()
    if "holt" in members or "ets" in members:
        lv, tr, sse = _smooth(x0, m, ga, gb, np.ones_like(ga), period)
        hl, ht, g = _pick(lv, tr, sse)
        out["holt"] = hl[:, None] + ht[:, None] * h[None]
        best_sse["holt"] = sse[rows, g]
    if "damped" in members or "ets" in members:
        da = np.repeat(ga, len(PHIS))
        db = np.repeat(gb, len(PHIS))
        dp = np.tile(PHIS, len(ga))
        lv, tr, sse = _smooth(x0, m, da, db, dp, period)
        dl, dt, g = _pick(lv, tr, sse)
        phi = dp[g][:, None]
        out["damped"] = dl[:, None] + dt[:, None] * np.cumsum(phi ** h[None], 1)
        best_sse["damped"] = sse[rows, g]
    if "ets" in members:
        out["ets"] = _ets_choice([out[k] for k in ("ses", "holt", "damped")], best_sse, n)

    # Theta (θ = 2): the SES level plus half the OLS slope of the adjusted values as drift.
    t = np.where(m, np.arange(L)[None, :], 0.0)
    nn = np.maximum(n, 1)
    tm = t.sum(1) / nn
    ym = x0.sum(1) / nn
    dt_ = np.where(m, t - tm[:, None], 0.0)
    slope = (dt_ * np.where(m, x0 - ym[:, None], 0.0)).sum(1) / np.maximum((dt_ * dt_).sum(1), 1e-300)
    al = ses_alpha[:, None]
    drift = (h[None] - 1 + 1 / al - (1 - al) ** n[:, None] / al) * (slope / 2)[:, None]
    out["theta"] = ses_level[:, None] + drift

    if "dotm" in members:
        out["dotm"] = _dotm(x0, m, horizon)
    if "ces" in members:
        out["ces"] = _ces(x0, m, horizon)
    result_raw: dict[str, np.ndarray] = {}
    if "hw" in members:  # on the raw values, its own season: not re-seasonalised below
        raw0, raw_m, _ = _observed(x)
        result_raw["hw"] = _holt_winters(raw0, raw_m, idx, max(period, 1), horizon)
    # On the raw values, no adjustment: the seasonal AR, and the airline model (the seasonal AR's forecast
    # for a series too short for it).
    sar = _sar(x, period, horizon) if "sar" in members or "airline" in members else None

    result = {k: v * season for k, v in out.items() if k in members} | result_raw
    if sar is not None and "sar" in members:
        result["sar"] = sar
    if sar is not None and "airline" in members:
        air, enough = _airline(x, period, horizon)
        result["airline"] = np.where(enough[:, None], air, sar)
    if "arima" in members:
        result["arima"] = arima(x, period, horizon)
    return result


def _ets_choice(forecasts: list[np.ndarray], sse: dict[str, np.ndarray], n: np.ndarray) -> np.ndarray:
    """Per series, of SES, Holt's and the damped trend's forecasts [S, H] the one of lowest AICc (the
    errors after each series' first value, ETS_PARAMETERS parameters each); a model with too few errors
    for its AICc is not chosen, and SES is where none has enough."""
    errors = np.maximum(n - 1, 1).astype(np.float64)
    crit = []
    for name, k in zip(("ses", "holt", "damped"), ETS_PARAMETERS, strict=True):
        room = errors - k - 1
        aicc = (
            errors * np.log(np.maximum(sse[name], 1e-300) / errors)
            + 2 * k
            + 2 * k * (k + 1) / np.where(room > 0, room, 1.0)
        )
        crit.append(np.where(room > 0, aicc, np.inf))
    best = np.argmin(np.stack(crit, 1), 1)
    return np.stack(forecasts, 1)[np.arange(len(best)), best]
