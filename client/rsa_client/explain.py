"""A global model's /v1 attention answer as DataFrames (`Client.explain`): what its forecast is made of.

lags      one row per lag and horizon step: lag (0 = the last value), step (1..H), value (the window
          in normalised units), weight (the lag's effective weight, normalised units) and, for a
          read-out, contribution (its part of the step's forecast, the forecast's units)
terms     a read-out's terms, one row per term and step: term (kernel `3 cyclic_cos`, `direct lags`,
          `missing`, `bias`, a covariate's name or `still window`), kind, lambda, gamma, theta, share
          (of the whole forecast) and contribution; per step they add up to `forecast`
members   a hybrid's members, one row per member and step: member, kind, weight, forecast
forecast  the model's forecast, one value per step (the hybrid's combination for a hybrid)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Explanation", "explanation"]


@dataclass(frozen=True)
class Explanation:
    lags: pd.DataFrame
    terms: pd.DataFrame
    members: pd.DataFrame
    forecast: pd.Series


def _steps(values: Any) -> np.ndarray:
    return np.arange(1, len(values) + 1)


def explanation(answer: dict[str, Any]) -> Explanation:
    """The frames of a global model's answer (`readout` or `sensitivity`); ValueError for a
    multichannel model's (its matrices: `Client.attention`)."""
    readout, sens, hybrid = answer.get("readout"), answer.get("sensitivity"), answer.get("hybrid")
    part = readout if readout is not None else sens
    if part is None:
        raise ValueError(
            f"model {answer.get('model')} answers attention matrices, not a global model's terms: "
            "use Client.attention"
        )
    weights = np.asarray(part["lag_weights"], dtype=np.float64)  # [L, H]
    L, H = weights.shape
    lag = np.repeat(np.arange(L - 1, -1, -1), H)
    lags = pd.DataFrame(
        {
            "lag": lag,
            "step": np.tile(np.arange(1, H + 1), L),
            "value": np.repeat(np.asarray(part["values"], dtype=np.float64), H),
            "weight": weights.ravel(),
        }
    )
    if readout is not None:
        lags["contribution"] = np.asarray(readout["lag_contributions"], dtype=np.float64).ravel()
    rows: list[dict[str, Any]] = []
    if readout is not None:
        named: list[tuple[str, str | None, dict[str, Any]]] = [
            (f"{k['index']} {k['kind']}", "kernel", k) for k in readout["kernels"]
        ]
        named += [("direct lags", "lags", readout["direct_lags"]), ("missing", "missing", readout["missing"])]
        named += [("bias", "bias", readout["bias"])]
        if readout.get("lift") is not None:  # a read-out's random layer: one term, nonlinear in the window
            named += [("random layer", "lift", readout["lift"])]
        named += [(c["name"], c["kind"], c) for c in readout["covariates"]]
        if readout.get("still") is not None:  # a window without change: forecast as its last cycle
            named += [("still window", "still", readout["still"])]
        for term, kind, d in named:
            for step, c in zip(_steps(d["contribution"]), d["contribution"], strict=True):
                rows.append(
                    {
                        "term": term,
                        "kind": kind,
                        "lambda": d.get("lambda"),
                        "gamma": d.get("gamma"),
                        "theta": d.get("theta"),
                        "share": d["share"],
                        "step": int(step),
                        "contribution": float(c),
                    }
                )
    columns = ["term", "kind", "lambda", "gamma", "theta", "share", "step", "contribution"]
    terms = pd.DataFrame(rows, columns=columns)
    members = pd.DataFrame(
        [
            {"member": m["name"], "kind": m["kind"], "weight": m["weight"], "step": int(s), "forecast": v}
            for m in (hybrid or {}).get("members", [])
            for s, v in zip(_steps(m["forecast"]), m["forecast"], strict=True)
        ],
        columns=["member", "kind", "weight", "step", "forecast"],
    )
    final = hybrid["forecast"] if hybrid is not None else part["forecast"]
    forecast = pd.Series(np.asarray(final, dtype=np.float64), index=_steps(final), name="forecast")
    forecast.index.name = "step"
    return Explanation(lags, terms, members, forecast)
