"""What a global model's forecast is made of (issue 48): the `/v1 .../attention` answer of a global
read-out, a hybrid and the global RSA-Transformer, computed in numpy from the served version's artifacts.

A global read-out is linear in what it reads (export/global_models/onnx.py `global_graph`): a window of L raw
values x is divided by its scale s, u = x / s (the missing start read as 0); its features are u·R (R the
graph's `rem_features` [L, K + n_lags]: the K REM kernels' last rows and the last n_lags steps), the
missing share and, for a covariate model, the standardised covariates z through `cov_readout`; the
forecast is (f·W + b)·s. So every term is a contribution in the forecast's units:

    forecast[h] = Σ_j s·u_j·(R·W)[j, h]      the lags (R·W: each lag's effective weight, normalised units)
                + s·missing·W_missing[h]      the share of the window not observed
                + s·b[h] (+ unit·W_const[h])  the bias (and an additive covariate model's constant)
                + Σ_d s·z_d·(C·W_rel)[d, h] + unit·z_d·(C·W_add)[d, h]   each covariate column d

and the same lags regrouped by feature give each REM kernel's part, s·(u·R_k)·W[k, h]. A kernel's share is
its Σ_h |weight × feature| over the sum of that for every term. The constants are read from the version's
model.onnx (`read_initializers`), so every version served, old or refitted, is explained by the numbers it
really forecasts with; the kernels' kind and λ/γ/θ come from the manifest's `readout` block.

A hybrid adds its local members' forecasts, fitted on the window as the service feeds them
(app/artifacts/local_models.py): out = readout·(1 − w) + Σ_i w_i·member_i.

A global RSA-Transformer exported with its inspection graph (inspect.onnx, since issue 48) is inspected
as a multichannel model; one exported before has its forecast graph alone, and what can be said of a
network without its graph's internals is each lag's local effect, the forecast's change per unit change
of one normalised lag (`finite_difference_rows` builds the windows, the served graph forecasts them;
`sensitivity` reads the answer).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.artifacts.covariates import CALENDAR_FEATURES, CovariateLayout
from app.artifacts.initializers import read_initializers
from app.artifacts.local_models import long_indices
from app.artifacts.manifest import Manifest
from app.artifacts.readout import hold_still, output_scales, window_scales

__all__ = [
    "FD_STEP",
    "ReadoutGraph",
    "column_owners",
    "explain_hybrid",
    "explain_readout",
    "finite_difference_rows",
    "load_readout_graph",
    "sensitivity",
]

_NAMES = frozenset(
    {"rem_features", "readout", "bias", "sums", "cov_mean", "cov_std", "cov_readout", "cov_unit", "cycle_1"}
    | {"lift_mean", "lift_std", "lift_matrix", "lift_bias"}
)
_CACHE_SIZE = 32  # versions whose constants are kept (each a few hundred kB at most)
# The finite-difference step on a normalised lag (the window's values are of order 1 there): large beside
# float32's rounding of the forecast (1e-7 relative), small beside the network's curvature.
FD_STEP = 1e-2


@dataclass(frozen=True)
class ReadoutGraph:
    """The constants of a global read-out's graph, float64: what its forecast is computed from."""

    rem_features: np.ndarray  # [L, K + n_lags]
    readout: np.ndarray  # [F, H]
    bias: np.ndarray  # [H]
    last: int  # the steps of the last cycle the scale reads
    cov_mean: np.ndarray | None = None  # [D]
    cov_std: np.ndarray | None = None
    cov_readout: np.ndarray | None = None  # [D, G]
    cov_unit: float = 1.0
    # A read-out with a random layer (app/artifacts/readout/spec.py `Lift`): its standardisation [F],
    # matrix [F, width] and bias [width]; None without one.
    lift_mean: np.ndarray | None = None
    lift_std: np.ndarray | None = None
    lift_matrix: np.ndarray | None = None
    lift_bias: np.ndarray | None = None
    # Whether the graph forecasts a still window as its last cycle repeated (readout.hold_still; graphs
    # exported before 2026-12-05 do not).
    holds_still: bool = False

    @property
    def input_length(self) -> int:
        return int(self.rem_features.shape[0])


_cache: OrderedDict[tuple[str, int, int], ReadoutGraph] = OrderedDict()
_lock = threading.Lock()


def load_readout_graph(path: Path) -> ReadoutGraph:
    """The read-out constants of the graph at `path` (a version's model.onnx), cached by path, size and
    modification time. ValueError when the graph is not a global read-out's."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    found = read_initializers(path.read_bytes(), _NAMES)
    missing = sorted({"rem_features", "readout", "bias", "sums"} - set(found))
    if missing:
        raise ValueError(f"{path} is not a global read-out's graph: it has no {missing}")
    f64 = {k: np.asarray(v, dtype=np.float64) for k, v in found.items()}
    graph = ReadoutGraph(
        rem_features=f64["rem_features"],
        readout=f64["readout"],
        bias=f64["bias"].reshape(-1),
        last=round(float(f64["sums"][:, 0].sum())),
        cov_mean=f64.get("cov_mean"),
        cov_std=f64.get("cov_std"),
        cov_readout=f64.get("cov_readout"),
        cov_unit=float(f64["cov_unit"]) if "cov_unit" in f64 else 1.0,
        lift_mean=f64.get("lift_mean"),
        lift_std=f64.get("lift_std"),
        lift_matrix=f64.get("lift_matrix"),
        lift_bias=f64.get("lift_bias"),
        holds_still="cycle_1" in found,
    )
    with _lock:
        _cache[key] = graph
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return graph


def column_owners(layout: CovariateLayout) -> list[tuple[str, str]]:
    """Each column of the `covariates` input [D]: (the covariate it belongs to, its kind), in order."""
    L, H = layout.input_length, layout.horizon
    owners: list[tuple[str, str]] = []
    for _ in range(L):  # past: step-major
        owners += [(p, "past") for p in layout.past]
    calendar = [(f, "calendar") for f in layout.calendar for _ in CALENDAR_FEATURES[f]]
    for _ in range(H):  # future: step-major, the named columns then the calendar's
        owners += [(f, "future") for f in layout.future] + calendar
    for s in layout.static:
        owners += [(s.name, "static")] * s.width
    return owners


def _heads(manifest: Manifest) -> list[tuple[str, int, float, float]] | None:
    block = manifest.readout
    if not isinstance(block, dict) or not isinstance(block.get("heads"), list):
        return None
    try:
        return [(str(k), int(d), float(v), float(t)) for k, d, v, t in block["heads"]]
    except (TypeError, ValueError):
        return None


def _n_lags(manifest: Manifest, graph: ReadoutGraph, heads: list[Any] | None) -> int:
    """The direct lag columns at the end of `rem_features`: the readout block's n_lags, else (a version
    exported before it) the columns after the kernels its heads count, else the trailing one-hot columns."""
    block = manifest.readout if isinstance(manifest.readout, dict) else {}
    if isinstance(block.get("n_lags"), int):
        return int(block["n_lags"])
    total = graph.rem_features.shape[1]
    if heads is not None:
        return total - len(heads)
    n = 0
    for col in graph.rem_features.T[::-1]:
        if np.count_nonzero(col) == 1 and col.max() == 1.0 and col.argmax() == graph.input_length - 1 - n:
            n += 1
        else:
            break
    return n


def _kernel(index: int, head: tuple[str, int, float, float] | None) -> dict[str, Any]:
    if head is None:
        return {"index": index, "kind": None, "dilation": None, "lambda": None, "gamma": None, "theta": None}
    kind, dilation, value, theta = head
    regular = kind == "regular"
    return {
        "index": index,
        "kind": kind,
        "dilation": dilation,
        "lambda": value if regular else None,
        "gamma": None if regular else value,
        "theta": None if regular else theta,
    }


def explain_readout(
    manifest: Manifest, graph: ReadoutGraph, window: np.ndarray, covariates: np.ndarray | None
) -> dict[str, Any]:
    """The read-out's answer for one served window [W] (float32 as fed, NaN before the series' start;
    its last L values are read) and its raw `covariates` row [D] (a covariate model), as
    `ReadoutExplanation`'s fields with float64 arrays. Its `forecast` is the sum of its contributions."""
    L = graph.input_length
    x = np.asarray(window, dtype=np.float32).astype(np.float64).reshape(-1)[-L:]
    m = (~np.isnan(x)).astype(np.float64)
    x0 = np.where(m > 0, x, 0.0)
    mirror = bool((manifest.readout or {}).get("mirror", False))  # FitSettings.mirror: a signed scale
    divisor = float(window_scales(x0[None], m[None], graph.last, mirror)[0])
    u = x0 / divisor  # [L]
    s = float(output_scales(x0[None], m[None], graph.last, mirror)[0])  # what the parts are multiplied by
    R, W = graph.rem_features, graph.readout
    n_feat = R.shape[1]
    heads = _heads(manifest)
    n_lags = _n_lags(manifest, graph, heads)
    n_kernels = n_feat - n_lags
    features = u @ R  # [K + n_lags]
    missing = 1.0 - float(m.mean())
    lag_weights = R @ W[:n_feat]  # [L, H]: each lag's effective weight, normalised units
    lag_parts = s * u[:, None] * lag_weights  # [L, H]
    feature_parts = s * features[:, None] * W[:n_feat]  # [K + n_lags, H]: the same, grouped by feature
    missing_part = s * missing * W[n_feat]
    bias_part = s * graph.bias
    lift_part, width = np.zeros(W.shape[1]), 0
    if graph.lift_matrix is not None:  # the random layer's outputs, read after the missing share
        assert graph.lift_mean is not None and graph.lift_std is not None and graph.lift_bias is not None
        width = len(graph.lift_bias)
        z = (np.append(features, missing) - graph.lift_mean) / graph.lift_std
        lifted = np.maximum(z @ graph.lift_matrix + graph.lift_bias, 0.0)  # [width]
        lift_part = s * lifted @ W[n_feat + 1 : n_feat + 1 + width]
    covariate_terms: list[tuple[str, str, np.ndarray]] = []
    layout = manifest.panel.layout if manifest.panel is not None else None
    if layout is not None and covariates is not None and graph.cov_readout is not None:
        assert graph.cov_mean is not None and graph.cov_std is not None
        raw = np.asarray(covariates, dtype=np.float32).astype(np.float64).reshape(-1)
        z = (raw - graph.cov_mean) / graph.cov_std
        z = np.where(np.isnan(z), 0.0, z)  # [D]
        C = graph.cov_readout  # [D, G]
        G = C.shape[1]
        rest = W[n_feat + 1 + width :]
        per_column = np.zeros((len(z), W.shape[1]))
        at = 0
        if layout.effect in ("relative", "both"):
            per_column += s * z[:, None] * (C @ rest[at : at + G])
            at += G
        if layout.effect in ("additive", "both"):
            back = s / divisor  # unit / divisor · s: 1, or 0 for an all-zero window
            per_column += back * graph.cov_unit * z[:, None] * (C @ rest[at : at + G])
            bias_part = bias_part + back * graph.cov_unit * rest[at + G]  # the additive constant
        owners = column_owners(layout)
        for name, kind in dict.fromkeys(owners):
            rows = [i for i, o in enumerate(owners) if o == (name, kind)]
            covariate_terms.append((name, kind, per_column[rows].sum(0)))
    forecast = (
        lag_parts.sum(0) + missing_part + bias_part + lift_part + sum((c for _, _, c in covariate_terms), 0.0)
    )
    still_part = None
    if graph.holds_still and graph.cov_readout is None:
        held = hold_still(forecast[None], x0[None], m[None], graph.last)[0]
        if not np.array_equal(held, forecast):  # the window's last cycle, not the terms above
            still_part, forecast = held - forecast, held
    magnitude = {
        "kernels": np.abs(feature_parts[:n_kernels]).sum(1),
        "lags": np.abs(feature_parts[n_kernels:]).sum(1),
        "missing": float(np.abs(missing_part).sum()),
        "bias": float(np.abs(bias_part).sum()),
        "lift": float(np.abs(lift_part).sum()),
        "covariates": np.array([np.abs(c).sum() for _, _, c in covariate_terms]),
        "still": 0.0 if still_part is None else float(np.abs(still_part).sum()),
    }
    total = sum(float(np.sum(v)) for v in magnitude.values()) or 1.0
    kernels = []
    for k in range(n_kernels):
        head = heads[k] if heads is not None and k < len(heads) else None
        kernels.append(
            {
                **_kernel(k, head),
                "share": float(magnitude["kernels"][k]) / total,
                "contribution": feature_parts[k],
            }
        )
    return {
        "scale": s,
        "values": u,
        "lag_weights": lag_weights,
        "lag_contributions": lag_parts,
        "kernels": kernels,
        "direct_lags": {
            "lags": n_lags,
            "share": float(magnitude["lags"].sum()) / total,
            "contribution": feature_parts[n_kernels:].sum(0),
        },
        "missing": {"value": missing, "share": magnitude["missing"] / total, "contribution": missing_part},
        "bias": {"share": magnitude["bias"] / total, "contribution": bias_part},
        "lift": None
        if not width
        else {"width": width, "share": magnitude["lift"] / total, "contribution": lift_part},
        "covariates": [
            {"name": name, "kind": kind, "share": float(np.abs(c).sum()) / total, "contribution": c}
            for name, kind, c in covariate_terms
        ],
        "still": None
        if still_part is None
        else {"share": magnitude["still"] / total, "contribution": still_part},
        "forecast": forecast,
    }


def explain_hybrid(manifest: Manifest, window: np.ndarray, readout: np.ndarray) -> dict[str, Any] | None:
    """A hybrid's members for one served window [W] and its read-out's forecast [H]: each member's
    forecast and weight (the read-out's 1 − Σ w_i; every local weight 0 for a series of fewer than the
    local block's `min_values` observed values) and the combined forecast; `held`: the window is still over
    the read-out's input length, so every member forecasts its last cycle (LocalSpec.feed). None for a
    read-out alone."""
    local = manifest.panel.local_spec if manifest.panel is not None else None
    if local is None:
        return None
    full = np.asarray(window, dtype=np.float32).astype(np.float64).reshape(1, -1)
    x = full[:, -local.length :]
    observed = int(local.observed(x)[0])  # of the part its members read
    used = observed >= local.min_values
    held, cycle = False, None
    if manifest.still_length is not None:
        still, cycles = local.held(full, manifest.still_length)
        held, cycle = bool(still[0]), cycles[0]
    members: list[dict[str, Any]] = []
    combined = np.zeros(local.horizon)
    season = None  # the period the members decomposed this series by
    if used:
        season = local.period
        if local.long_period is not None and long_indices(x, local.long_period)[1][0]:
            season = local.long_period
        fc = local.forecasts(x)
        shares = local.series_weights(x)[0]  # the base weights, or this series' own with a tilt
        for name, w in zip(local.members, shares[1:].tolist(), strict=True):
            member = cycle if held and cycle is not None else fc[name][0]
            members.append({"name": name, "kind": "local", "weight": float(w), "forecast": member})
            combined += w * member
    weight = float(shares[0]) if used else 1.0
    members.insert(0, {"name": "readout", "kind": "global", "weight": weight, "forecast": readout})
    combined += weight * readout
    return {
        "local_used": used,
        "held": held,
        "observed": observed,
        "min_values": local.min_values,
        "season": season,
        "members": members,
        "forecast": combined,
    }


def finite_difference_rows(window: np.ndarray, scale: float, step: float = FD_STEP) -> np.ndarray:
    """[L + 1, W] float32 windows: the window [W] as sent, then each observed step of its last L values
    moved up by `step`·scale (one normalised unit's `step`), for a network's lag sensitivity."""
    base = np.asarray(window, dtype=np.float32).reshape(-1)
    L = len(base)
    rows = np.repeat(base[None], L + 1, 0)
    for j in range(L):
        if not np.isnan(base[j]):
            rows[j + 1, j] = np.float32(base[j] + step * scale)
    return rows


def sensitivity(outputs: np.ndarray, window: np.ndarray, scale: float, step: float = FD_STEP) -> np.ndarray:
    """[L, H] each lag's effect on the forecast (d forecast / d value: the same in normalised units),
    from the forecasts [L + 1, H] of `finite_difference_rows` (0 for a step before the series' start,
    which the model masks)."""
    out = np.asarray(outputs, dtype=np.float64)
    base = np.asarray(window, dtype=np.float32).reshape(-1)
    moved = np.array(
        [0.0 if np.isnan(b) else float(np.float32(b + step * scale)) - float(b) for b in base]
    )  # the step float32 really took, in raw units
    delta = out[1:] - out[:1]  # [L, H]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_raw = np.where(moved[:, None] != 0, delta / moved[:, None], 0.0)
    return per_raw  # d(y/s)/d(x/s) = dy/dx: the normalised units cancel
