"""Our model in the competitions: `run_ours`, the one place that names it, its candidates and ablation;
the global read-out's transfer to unseen series; its memory on a synthetic panel streamed one series
at a time."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.inference.metrics import mase
from bench.competition_data import Competition, synthetic_panel
from bench.competition_scores import LEVELS, Forecast, quantiles_from_intervals
from export.global_models.config import PanelConfig
from export.global_models.hybrid import (
    equal_shares,
    fit_members,
    local_key_parts,
    local_min_values,
    tail_windows,
)
from export.global_models.model import GlobalModel, fit_global
from export.global_models.search import train_global
from export.reports import UnseenCheck

__all__ = [
    "OURS_LABEL",
    "Candidate",
    "OursResult",
    "ours_config",
    "run_ours",
    "synthetic_memory",
    "unseen_check",
]

OURS_LABEL = "Hybrid: REM read-out + local models"  # our model's rows (run_ours)


@dataclass(frozen=True, eq=False)
class Candidate:
    """One setting our model chose among on validation: its validation MASE, its forecasts of the
    official hold-outs [S, H] when fitted on every history, and whether it was the one chosen."""

    validation_mase: float
    point: np.ndarray
    chosen: bool = False


@dataclass(frozen=True, eq=False)
class OursResult:
    """What our model gives the benchmark: `label` names its rows (the same on every data set), `point`
    [S, H], `quantiles` {q: [S, H]} at QUANTILES (None: no intervals), fit and forecast wall times,
    `candidates` (name -> Candidate: the settings its validation chose among, scored on test here) and
    `extra` (JSON values reported as they are)."""

    label: str
    point: np.ndarray
    quantiles: dict[float, np.ndarray] | None
    fit_s: float
    forecast_s: float
    candidates: dict[str, Candidate] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def forecast(self) -> Forecast:
        return Forecast(self.label, self.point, self.quantiles, self.fit_s, self.forecast_s)


def ours_config(comp: Competition, lift: int | None = None) -> PanelConfig:
    """Our model's settings on `comp`: its horizon and period, everything else the default of `python -m
    export.panel train` (the random layer chosen on validation unless `lift` is given)."""
    return PanelConfig(horizon=comp.horizon, period=comp.period, lift=lift)


def run_ours(comp: Competition, lift: int | None = None) -> OursResult:
    """Our model, and the only place that names it: the default of `python -m export.panel train`, the hybrid
    (export/global_models/hybrid.py): one REM read-out over every series of the data set averaged in equal
    shares (each series' shares tilted by its features where validation trusts it) with local models fitted on
    each series (Theta, the damped trend, the dynamic optimised Theta, a seasonal AR, the ETS choice by AICc,
    the airline ARIMA: the set and the window they read chosen on validation, as the read-out's input length
    is: ends of the histories held out at two origins, never the official hold-outs), with the export's pooled
    split-conformal intervals of the hybrid (export/global_models/onnx.py `calibrate_global`) at 20/40/60/80%,
    calibrated on the histories alone. The fit time holds the searches, the final fit and the calibration.
    Candidates (validation beside test, not timed): each read-out input length with the chosen local half,
    each local set and window with the chosen read-out. `extra["ablation"]`: test MASE of the read-out alone,
    of the local half alone, and of the hybrid without REM features (its read-out on the last values and the
    missing share only, searched the same way). `lift`: the read-out's random layer (export/global_models/
    config.py `PanelConfig.lift`: None chosen on validation, the default model's; 0 none; a width)."""
    from export.global_models.onnx import calibrate_global, interval_halfwidths

    cfg = ours_config(comp, lift)
    start = time.perf_counter()
    model = train_global(comp.train, cfg, local=True)
    intervals, said = calibrate_global(model, comp.train, LEVELS)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    point = model.forecast(comp.train)
    quantiles = None
    if intervals is not None:
        half = interval_halfwidths(intervals, model, comp.train)  # [levels, S, H]
        bounds = {lv: (point - h, point + h) for lv, h in zip(intervals["levels"], half, strict=True)}
        quantiles = quantiles_from_intervals(point, bounds)
    forecast_s = time.perf_counter() - start
    alone = dataclasses.replace(model, local=None).forecast(comp.train)  # the chosen read-out's
    candidates: dict[str, Candidate] = {}
    if model.local is not None:  # the chosen local half, fitted once for every read-out length
        windows = tail_windows(comp.train, model.window_length).astype(np.float32)  # as served
        local, weight = model.local.feed(windows, model.input_length)
    for key, val in model.search.items():
        if key.isdigit():  # a read-out input length, with the chosen local half
            length = int(key)
            chosen = length == model.input_length
            if not chosen:
                g = fit_global(comp.train, model.config, length).forecast(comp.train)  # the lift chosen
                forecast = g if model.local is None else g * (1.0 - weight) + local  # LocalSpec.combine
            candidates[f"L={length}"] = Candidate(val, point if chosen else forecast, chosen)
    candidates.update(_local_candidates(model, comp, alone, point))
    if model.local is not None and model.local.tilt is not None:  # its validation: fitted on other series
        tilted = f"local {'+'.join(model.local.members)} {model.local.length} tilted by features"
        candidates[tilted] = Candidate(model.search["tilt_cross_series"], point, True)
    no_rem = train_global(comp.train, dataclasses.replace(cfg, bank={}), local=True)

    def test_mase(forecast: np.ndarray) -> float:
        return float(mase(comp.train, comp.test, forecast, comp.period).mean())

    ablation = {
        "hybrid": test_mase(point),
        "read-out alone": test_mase(alone),
        "hybrid without REM features": test_mase(no_rem.forecast(comp.train)),
    }
    if model.local is not None:  # the read-out alone where no hybrid validated better
        k = len(model.local.members)
        members_only = dataclasses.replace(model.local, weights=(1.0 / k,) * k, tilt=None)
        ablation["local half alone (the read-out for series too short for it)"] = test_mase(
            dataclasses.replace(model, local=members_only).forecast(comp.train)
        )
    return OursResult(
        label=OURS_LABEL,
        point=point,
        quantiles=quantiles,
        fit_s=fit_s,
        forecast_s=forecast_s,
        candidates=candidates,
        extra={
            "input_length": model.input_length,
            "lift": model.config.lift,  # the random layer's width (0: none)
            "local": None if model.local is None else model.local.to_json(),
            "intervals": said,
            "ablation": ablation,
        },
    )


def _local_candidates(
    model: GlobalModel, comp: Competition, alone: np.ndarray, point: np.ndarray
) -> dict[str, Candidate]:
    """Each local set and window the search scored (`local_<members>_<length>` in `model.search`), in
    equal shares with the chosen read-out's forecasts `alone`, mixed as the search's validation mixes
    them (`equal_shares`): every member fitted once per window. The chosen one (equal shares, no tilt)
    is the served `point`."""
    from app.artifacts.hybrid import LocalSpec

    found = [
        (local_key_parts(key), val)
        for key, val in model.search.items()
        if key.startswith("local_")  # local_<members>_<length>[_w<long period>[_s<short length>]]
    ]
    every = tuple(dict.fromkeys(m for (members, *_), _ in found for m in members))
    by_window: dict[tuple[int, int | None, int | None], tuple[dict[str, np.ndarray], np.ndarray]] = {}
    out: dict[str, Candidate] = {}
    least = local_min_values(comp.period)
    for (members, length, long_period, short_length), val in found:
        if (length, long_period, short_length) not in by_window:
            by_window[length, long_period, short_length] = fit_members(
                comp.train, length, comp.period, comp.horizon, every, least, long_period, short_length
            )[:2]
        share = 1.0 / (len(members) + 1)
        spec = LocalSpec(
            members,
            (share,) * len(members),
            length,
            comp.period,
            comp.horizon,
            least,
            long_period=long_period,
            short_length=short_length,
        )
        # equal shares chosen (no tilt), whatever `min_values` the served half then took (short_min_values)
        chosen = model.local is not None and spec == dataclasses.replace(model.local, min_values=least)
        window = by_window[length, long_period, short_length]
        forecast = point if chosen else equal_shares(alone, *window, members)
        name = f"local {'+'.join(members)} {length}" + ("" if long_period is None else f" w{long_period}")
        out[name + ("" if short_length is None else f" s{short_length}")] = Candidate(val, forecast, chosen)
    return out


def unseen_check(comp: Competition, **overrides: object) -> UnseenCheck:
    """MASE on the odd-numbered series of a global read-out trained on the even-numbered ones only (never
    seen) and of one trained on all, at the same input length: the global model's transfer to new series."""
    cfg = PanelConfig(horizon=comp.horizon, period=comp.period, **overrides)  # type: ignore[arg-type]
    full = train_global(comp.train, cfg)
    periods = full.input_length // (comp.period if comp.period > 1 else 4)  # train_global's unit
    half = train_global(comp.train[0::2], dataclasses.replace(cfg, input_periods=periods))
    odd = comp.train[1::2]
    on_all = float(mase(odd, comp.test[1::2], full.forecast(odd), comp.period).mean())
    on_unseen = float(mase(odd, comp.test[1::2], half.forecast(odd), comp.period).mean())
    return UnseenCheck(mase_trained_on_all=on_all, mase_unseen=on_unseen, ratio=on_unseen / on_all)


def synthetic_memory(comp: Competition, n: int, input_periods: int = 3) -> dict[str, float]:
    """Train the global read-out on `n` synthetic series streamed one at a time (one pass, no IRLS, a
    fixed input length); the process's peak resident memory (ru_maxrss) before and after, in MiB."""
    import resource

    def peak() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    before = peak()
    cfg = PanelConfig(horizon=comp.horizon, period=comp.period, input_periods=input_periods, irls=0)
    start = time.perf_counter()
    model = fit_global(synthetic_panel(comp, n), cfg, input_periods * comp.period)
    return {
        "series": n,
        "fit_s": time.perf_counter() - start,
        "peak_rss_mib_before": before,
        "peak_rss_mib_after": peak(),
        "weights": float(model.weights.size),
    }
