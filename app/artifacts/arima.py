"""`arima`: an automatic seasonal ARIMA per series, numpy only, vectorized over the series (a local member
of the hybrid, app/artifacts/local_models.py).

AutoARIMA's choices (Hyndman & Khandakar 2008, as statsforecast makes them), made cheaply:
- seasonal differencing (D = 1) where the seasonal strength of a classical additive decomposition,
  max(0, 1 − Var(R) / Var(S + R)), exceeds 0.64 (statsforecast's `seasonal_test="seas"` threshold) and the
  series holds three cycles;
- then up to two regular differences while KPSS rejects level stationarity at 5% (lags ⌊3√n / 13⌋, as
  `ndiffs`);
- on the differenced values w (their mean taken out where d + D < 2: the drift or mean term), every
  ARMA(p, q)(P, Q)_s with p, q ≤ 2 and P + Q ≤ 1, estimated by Hannan-Rissanen (a long AR's residuals
  stand in for the innovations, then one least-squares fit per order), the order of lowest AICc kept
  among those whose factors are stationary and invertible;
- the forecast by the multiplicative polynomials' recursion, the in-sample errors by the same filter from
  zero (the conditional sum of squares' start), then the differences undone.

Least squares in place of AutoARIMA's likelihood optimiser keeps the fit a fixed number of array
operations: the 1,428 M3 monthly series over 120 values take 0.2 s here. Alone on the official
hold-outs (each series' last 120 values before them; test MASE, /tmp experiment of issue 43's notes,
2026-12-05): M3 monthly 0.905, quarterly 1.163, yearly 2.981, other 1.963, Tourism monthly 1.581, against
statsforecast's AutoARIMA's 0.876, 1.191, 2.882, 1.852, 1.488 on the whole histories (`bench.competitions`)
and the airline model's 0.901, 1.177, 3.111, 1.932 on the same windows. Weaker alone than AutoARIMA on
monthly data, it is the better member beside the others: export/global_models/hybrid.py, `_ARIMA_SETS`.
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["arima"]

SEASONAL_STRENGTH = 0.64  # statsforecast's (and R forecast's) threshold for a seasonal difference
KPSS_CRITICAL = 0.463  # KPSS level test, 5%
MAX_D = 2
ROOT_MARGIN = 0.98  # each AR and MA factor's roots at least this far outside the unit circle, inverted
LONG_AR = 4  # the long AR's order without a cycle; with one, the cycle + 2


def _diff(v: np.ndarray, lag: int) -> np.ndarray:
    out = np.full_like(v, np.nan)
    out[:, lag:] = v[:, lag:] - v[:, :-lag]
    return out


def _lagged(v: np.ndarray, lag: int) -> np.ndarray:
    out = np.zeros_like(v)
    out[:, lag:] = v[:, :-lag]
    return out


def seasonal_strength(x: np.ndarray, period: int) -> np.ndarray:
    """Per series [S] of windows [S, L] (the missing start NaN): max(0, 1 − Var(R) / Var(S + R)) of a
    classical additive decomposition (the centred moving average as the trend, one mean per phase as the
    season); 0 where it cannot be measured."""
    _S, L = x.shape
    w = np.r_[0.5, np.ones(period - 1), 0.5] / period if period % 2 == 0 else np.ones(period) / period
    k = len(w)
    if k + period > L:
        return np.zeros(len(x))
    trend = np.full_like(x, np.nan)
    trend[:, k // 2 : k // 2 + L - k + 1] = np.lib.stride_tricks.sliding_window_view(x, k, axis=1) @ w
    detrended = x - trend  # NaN where the average is not whole
    ok = ~np.isnan(detrended)
    phase = (L - 1 - np.arange(L)) % period
    means = np.stack(
        [np.where(ok[:, phase == p], detrended[:, phase == p], 0.0).sum(1) for p in range(period)], 1
    ) / np.maximum(np.stack([ok[:, phase == p].sum(1) for p in range(period)], 1), 1)
    season = (means - means.mean(1, keepdims=True))[:, phase]
    count = np.maximum(ok.sum(1), 1)

    def var(v: np.ndarray) -> np.ndarray:
        v0 = np.where(ok, v, 0.0)
        mean = v0.sum(1) / count
        return (np.where(ok, v0 - mean[:, None], 0.0) ** 2).sum(1) / count

    total = var(detrended)
    strength = 1 - var(detrended - season) / np.where(total > 0, total, 1.0)
    return np.where((total > 0) & (ok.sum(1) >= 2 * period), np.maximum(strength, 0.0), 0.0)


def _kpss_rejects(v: np.ndarray) -> np.ndarray:
    """Per series (the missing start NaN): whether KPSS rejects level stationarity at 5%."""
    ok = ~np.isnan(v)
    n = ok.sum(1)
    count = np.maximum(n, 1).astype(np.float64)
    v0 = np.where(ok, v, 0.0)
    e = np.where(ok, v0 - (v0.sum(1) / count)[:, None], 0.0)
    eta = (np.cumsum(e, 1) ** 2).sum(1) / count**2
    lags = np.floor(3 * np.sqrt(n) / 13).astype(int)
    long_run = (e * e).sum(1) / count
    for lag in range(1, int(lags.max(initial=0)) + 1):
        weight = np.where(lags >= lag, 1 - lag / (lags + 1), 0.0)
        long_run = long_run + 2 * weight * (e[:, lag:] * e[:, :-lag]).sum(1) / count
    flat = long_run <= 1e-12 * (v0 * v0).sum(1) / count  # a constant (or a line, once differenced)
    return (n >= 4) & ~flat & (eta > KPSS_CRITICAL * np.where(flat, 1.0, long_run))


def _stable(a1: np.ndarray, a2: np.ndarray) -> np.ndarray:
    """1 − a1·B − a2·B² has its roots outside the unit circle, by the margin."""
    r = ROOT_MARGIN
    return (a2 + a1 < r) & (a2 - a1 < r) & (np.abs(a2) < r)


def _arma(w: np.ndarray, s: int, horizon: int, mean: bool) -> np.ndarray:
    """Forecast [S, H] of the differenced values w [S, L] (the missing start NaN)."""
    S, L = w.shape
    ok = ~np.isnan(w)
    n = ok.sum(1)
    count = np.maximum(n, 1)
    mu = np.where(ok, w, 0.0).sum(1) / count if mean else np.zeros(S)
    z = np.where(ok, w - mu[:, None], 0.0)
    scale = np.sqrt((z * z).sum(1) / count)
    scale = np.where(scale > 0, scale, 1.0)
    z = z / scale[:, None]
    first = L - n
    rows = ok & (np.arange(L)[None, :] > first[:, None])  # every value after the first: lags before it are 0
    # Hannan-Rissanen: a long AR's residuals stand in for the innovations.
    order = s + 2 if s > 1 else LONG_AR
    lags = np.stack([_lagged(z, k) for k in range(1, order + 1)], 2)
    on = np.where(rows[:, :, None], lags, 0.0)
    gram = (
        np.einsum("slk,slj->skj", on, on) + 1e-6 * np.eye(order) * np.maximum(rows.sum(1), 1)[:, None, None]
    )
    coef = np.linalg.solve(gram, np.einsum("slk,sl->sk", on, np.where(rows, z, 0.0))[:, :, None])[:, :, 0]
    innovations = np.where(ok, z - np.einsum("slk,sk->sl", lags, coef), 0.0)
    columns = {"ar1": _lagged(z, 1), "ar2": _lagged(z, 2), "ma1": _lagged(innovations, 1)}
    columns["ma2"] = _lagged(innovations, 2)
    if s > 1:
        columns |= {"sar": _lagged(z, s), "sma": _lagged(innovations, s)}
    names = list(columns)
    X = np.stack([np.where(rows, columns[c], 0.0) for c in names], 2)
    y = np.where(rows, z, 0.0)
    gram, xy, yy = np.einsum("slk,slj->skj", X, X), np.einsum("slk,sl->sk", X, y), (y * y).sum(1)
    used = rows.sum(1).astype(np.float64)
    # White noise first: always estimable, so every series has an order.
    best, best_coef = np.full(S, np.inf), np.zeros((S, len(names)))
    for p, q, seasonal in itertools.product(range(3), range(3), ((), ("sar",), ("sma",)) if s > 1 else ((),)):
        terms = [f"ar{i}" for i in range(1, p + 1)] + [f"ma{i}" for i in range(1, q + 1)] + list(seasonal)
        full = np.zeros((S, len(names)))
        sse = yy.copy()
        if terms:
            at = [names.index(t) for t in terms]
            g = gram[:, at][:, :, at] + 1e-8 * np.eye(len(at)) * np.maximum(used, 1.0)[:, None, None]
            b = np.linalg.solve(g, xy[:, at][:, :, None])[:, :, 0]
            sse = yy - (b * xy[:, at]).sum(1)
            full[:, at] = b
        c = dict(zip(names, full.T, strict=True))
        k = len(terms) + 1 + int(mean)  # the coefficients, the variance, the mean
        room = used - k - 1
        aicc = used * np.log(np.maximum(sse, 1e-12) / np.maximum(used, 1.0)) + 2 * k
        aicc = aicc + 2 * k * (k + 1) / np.where(room > 0, room, 1.0)
        fits = _stable(c["ar1"], c["ar2"]) & _stable(-c["ma1"], -c["ma2"]) & (room > 0)
        if s > 1:
            fits &= (np.abs(c["sar"]) < ROOT_MARGIN) & (np.abs(c["sma"]) < ROOT_MARGIN)
        aicc = np.where(fits, aicc, np.inf if terms else np.finfo(np.float64).max)
        better = aicc < best
        best = np.where(better, aicc, best)
        best_coef = np.where(better[:, None], full, best_coef)
    c = dict(zip(names, best_coef.T, strict=True))
    # (1 − φ1B − φ2B²)(1 − ΦB^s) and (1 + θ1B + θ2B²)(1 + ΘB^s), multiplied out: lag -> coefficient.
    ar, ma = {1: c["ar1"], 2: c["ar2"]}, {1: c["ma1"], 2: c["ma2"]}
    if s > 1:
        for lag, a in ((s, c["sar"]), (s + 1, -c["ar1"] * c["sar"]), (s + 2, -c["ar2"] * c["sar"])):
            ar[lag] = ar.get(lag, 0.0) + a
        for lag, a in ((s, c["sma"]), (s + 1, c["ma1"] * c["sma"]), (s + 2, c["ma2"] * c["sma"])):
            ma[lag] = ma.get(lag, 0.0) + a
    # A lag no series uses (every coefficient 0) adds nothing: leaving it out changes no value and saves
    # much of the recursion where the series are few (one M3 monthly window of 120 values: 3.7 -> 2.5 ms,
    # 100 calls each on the 2-core VM; bit-equal forecasts on five M3/Tourism sets, whole and a series alone).
    ar = {lag: a for lag, a in ar.items() if np.any(a)}
    ma = {lag: a for lag, a in ma.items() if np.any(a)}
    zz = np.concatenate([z, np.zeros((S, horizon))], 1)
    errors = np.zeros((S, L + horizon))
    for t in range(L + horizon):
        fit = sum((a * zz[:, t - lag] for lag, a in ar.items() if lag <= t), np.zeros(S))
        fit = fit + sum((a * errors[:, t - lag] for lag, a in ma.items() if lag <= t), np.zeros(S))
        if t < L:
            errors[:, t] = np.where(rows[:, t], zz[:, t] - fit, 0.0)
        else:
            zz[:, t] = fit
    return zz[:, L:] * scale[:, None] + mu[:, None]


def arima(x: np.ndarray, period: int, horizon: int) -> np.ndarray:
    """The forecast [S, H] of raw windows x [S, L] (the missing start NaN)."""
    x = np.asarray(x, dtype=np.float64)
    S, L = x.shape
    s = max(period, 1)
    n = (~np.isnan(x)).sum(1)
    seasonal = np.zeros(S, dtype=bool)
    if s > 1:
        seasonal = (seasonal_strength(x, s) > SEASONAL_STRENGTH) & (n >= 3 * s + 3)
    d = np.zeros(S, dtype=int)
    level = np.where(seasonal[:, None], _diff(x, s), x)
    for step in range(MAX_D):
        d += _kpss_rejects(level) & (d == step)
        level = _diff(level, 1)
    out = np.empty((S, horizon))
    for D, dd in itertools.product((0, 1), range(MAX_D + 1)):
        rows = np.flatnonzero((seasonal == D) & (d == dd))
        if not len(rows):
            continue
        chain, lags = [x[rows]], [s] * D + [1] * dd
        for lag in lags:
            chain.append(_diff(chain[-1], lag))
        f = _arma(chain[-1], s, horizon, mean=D + dd < 2)
        for values, lag in zip(reversed(chain[:-1]), reversed(lags), strict=True):  # undo the differences
            ext = np.concatenate([np.nan_to_num(values), np.zeros((len(rows), horizon))], 1)
            for k in range(horizon):
                ext[:, L + k] = f[:, k] + ext[:, L + k - lag]
            f = ext[:, L:]
        out[rows] = f
    return out
