"""A global REM read-out (export/global_model.py's `GlobalModel`) as an ONNX graph and a served model version.

The whole forecast runs inside the graph, so the service feeds nothing but windows: each window's scale
(the mean |value| of its last cycle), the REM features as one MatMul with a constant kernel matrix [L, F]
(the bank's last rows plus the lag selection), the share of the window that is missing, the ridge
read-out and the un-scaling. A history shorter than L is fed with its missing start as NaN: the graph
masks those steps (they read as 0, and their share is a feature) exactly as `GlobalModel.forecast` does,
so nothing is ever filled with invented values (docs/artifacts.md, "Global models").

Given the training series, `calibrate_global` adds split-conformal intervals pooled across series, in
units of each series' own seasonal-naive error, which the service computes from the window it forecasts.

    python -m export.panel export --model runs/stores/model.json --name stores --repository model_repository
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from app.artifacts.contract import (
    CALENDAR_FREQUENCY,
    COVARIATE_INPUT,
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    GLOBAL_READOUT_KIND,
    LOCAL_INPUT,
    LOCAL_WEIGHT_INPUT,
    MANIFEST_FILE,
    MODEL_FILE,
    window_scale,
)
from app.artifacts.feed import local_inputs
from app.artifacts.readout import (
    SCALE_FLOOR,
    CovariateRows,
    ReadoutSpec,
    calibrate,
)
from app.artifacts.readout import TINY as _TINY  # the scale's fallback threshold, as the numpy model's
from export.bank import expand_bank
from export.publish import publish_version
from export.reports import GroupCoverage, IntervalCalibration, to_dict
from rsa_core.windows import tail_windows

if TYPE_CHECKING:
    from app.artifacts.covariates import CovariateLayout
    from app.artifacts.local_models import LocalSpec
    from export.global_model import GlobalModel

__all__ = [
    "DEFAULT_LEVELS",
    "GLOBAL_KIND",
    "OPSET",
    "TOLERANCE",
    "calibrate_global",
    "check_covariates",
    "check_histories",
    "export_global",
    "global_graph",
    "group_coverage",
    "history_groups",
    "interval_halfwidths",
    "panel_manifest",
    "readout_spec",
    "run_graph",
    "series_spread",
]

GLOBAL_KIND = GLOBAL_READOUT_KIND  # the manifest's `kind`
OPSET = 18
# float32 graph against the float64 numpy model: |onnx − numpy| <= TOLERANCE · (1 + |numpy|).
TOLERANCE = 1e-4
_MEAN_MONTH_S = 365.2425 * 86_400 / 12  # a calendar month's nominal seconds (export/data/timestamps.py)
DEFAULT_LEVELS = (50.0, 80.0, 90.0, 95.0, 99.0)  # as the multichannel exporter's


def _const(name: str, value: ArrayLike, dtype: Any = np.float32) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def global_graph(model: GlobalModel) -> Any:
    """The forecast graph of `model`: `window` float32 [batch, L, 1] (NaN where the history has not
    started) -> `forecast` float32 [batch, H, 1], on the raw scale. A covariate model also takes
    `covariates` float32 [batch, D] (app/artifacts/covariates.py's layout, raw; NaN where a past
    covariate's series has not started), standardised and read linearly beside the target's features."""
    import onnx
    from onnx import TensorProto, helper

    cfg, L, H, W = model.config, model.input_length, model.config.horizon, model.window_length
    last = max(cfg.period, 1)
    kernels = model.kernels()  # [K, L]
    lags = np.zeros((L, cfg.n_lags))
    lags[L - cfg.n_lags + np.arange(cfg.n_lags), np.arange(cfg.n_lags)] = 1.0  # the last n_lags steps
    feature_matrix = np.concatenate([kernels.T, lags], 1)  # [L, K + n_lags]
    sums = np.zeros((L, 2))  # column 0: the last cycle's steps; column 1: every step
    sums[L - last :, 0] = 1.0
    sums[:, 1] = 1.0
    inits = [
        _const("shape_in", [-1, W], np.int64),
        _const("keep_from", [W - L], np.int64),  # a hybrid's window is longer than the read-out's L
        _const("keep_to", [W], np.int64),
        _const("keep_axis", [1], np.int64),
        _const("shape_out", [-1, H, 1], np.int64),
        _const("zero", 0.0),
        _const("one", 1.0),
        _const("tiny", _TINY),
        _const("sums", sums),
        _const("pick_last", [[1.0], [0.0]]),
        _const("pick_whole", [[0.0], [1.0]]),
        _const("mean_of_steps", np.full((L, 1), 1.0 / L)),
        _const("rem_features", feature_matrix),  # the REM kernels' last rows and the lags, [L, F - 1]
        _const("readout", model.weights[:-1]),  # [F, H]
        _const("bias", model.weights[-1]),  # [H]
    ]
    node = helper.make_node
    nodes = [
        node("Reshape", [FORECAST_INPUT, "shape_in"], ["x_all"]),  # [B, W]
        node("Slice", ["x_all", "keep_from", "keep_to", "keep_axis"], ["x"]),  # [B, L]: the last L
        node("IsNaN", ["x"], ["missing"]),
        node("Not", ["missing"], ["observed"]),
        node("Cast", ["observed"], ["mask"], to=TensorProto.FLOAT),  # [B, L], 1 where observed
        node("Where", ["missing", "zero", "x"], ["x0"]),  # the missing start reads as 0
        # The scale: mean |value| of the last cycle's observed steps, else of the window's, else 1.
        node("Abs", ["x0"], ["ax"]),
        node("MatMul", ["ax", "sums"], ["abs_sums"]),  # [B, 2]
        node("MatMul", ["mask", "sums"], ["counts"]),  # [B, 2]
        node("Max", ["counts", "one"], ["counts1"]),
        node("Div", ["abs_sums", "counts1"], ["means"]),
        node("MatMul", ["means", "pick_last"], ["s_last"]),  # [B, 1]
        node("MatMul", ["means", "pick_whole"], ["s_whole"]),
        node("Greater", ["s_last", "tiny"], ["last_ok"]),
        node("Where", ["last_ok", "s_last", "s_whole"], ["s_any"]),
        node("Greater", ["s_any", "tiny"], ["any_ok"]),
        node("Where", ["any_ok", "s_any", "one"], ["scale"]),  # [B, 1]
        node("Div", ["x0", "scale"], ["u"]),  # [B, L] normalised, 0 where missing
        node("MatMul", ["u", "rem_features"], ["features"]),  # [B, F - 1]
        node("MatMul", ["mask", "mean_of_steps"], ["observed_share"]),  # [B, 1]
        node("Sub", ["one", "observed_share"], ["missing_share"]),
        node("Concat", ["features", "missing_share"], ["f_target"], axis=1),  # [B, F]
        node("MatMul", ["f", "readout"], ["y0"]),  # [B, H]
        node("Add", ["y0", "bias"], ["y"]),
        node("Mul", ["y", "scale"], ["raw"]),  # back to the raw scale
        node("Reshape", ["out", "shape_out"], [FORECAST_OUTPUT]),  # [B, H, 1]
    ]
    inputs = [helper.make_tensor_value_info(FORECAST_INPUT, TensorProto.FLOAT, ["batch", W, 1])]
    if model.local is None:
        nodes.insert(len(nodes) - 1, node("Identity", ["raw"], ["out"]))
    else:  # the hybrid: read-out · (1 − the local weight) + the local models' weighted forecasts
        nodes[len(nodes) - 1 : len(nodes) - 1] = [
            node("Sub", ["one", LOCAL_WEIGHT_INPUT], ["global_weight"]),  # [B, 1]
            node("Mul", ["raw", "global_weight"], ["raw_part"]),
            node("Add", ["raw_part", LOCAL_INPUT], ["out"]),
        ]
        inputs += [
            helper.make_tensor_value_info(LOCAL_INPUT, TensorProto.FLOAT, ["batch", H]),
            helper.make_tensor_value_info(LOCAL_WEIGHT_INPUT, TensorProto.FLOAT, ["batch", 1]),
        ]
    layout = model.covariates
    at = next(i for i, n in enumerate(nodes) if n.output[0] == "f_target") + 1
    if layout is None:
        nodes.insert(at, node("Identity", ["f_target"], ["f"]))
    else:
        inits += [
            _const("cov_mean", np.asarray(layout.mean)),
            _const("cov_std", np.asarray(layout.std)),
            _const("cov_readout", layout.readout_matrix(kernels)),  # [D, G]
            _const("cov_unit", layout.unit),
        ]
        nodes[at:at] = [
            node("Sub", [COVARIATE_INPUT, "cov_mean"], ["cov_c"]),
            node("Div", ["cov_c", "cov_std"], ["cov_z"]),
            node("IsNaN", ["cov_z"], ["cov_missing"]),
            node("Where", ["cov_missing", "zero", "cov_z"], ["cov_z0"]),  # a short series' past start
            node("MatMul", ["cov_z0", "cov_readout"], ["cov_g"]),  # [B, G]
            # layout.scaled_features: relative as is; additive [g / scale, 1 / scale]; both, both
            node("Div", ["cov_unit", "scale"], ["inv_scale"]),  # [B, 1]
            node("Mul", ["cov_g", "inv_scale"], ["cov_g_abs"]),
            node("Concat", ["cov_g_abs", "inv_scale"], ["cov_additive"], axis=1),
        ]
        parts = {"relative": ["cov_g"], "additive": ["cov_additive"], "both": ["cov_g", "cov_additive"]}
        nodes[at + 8 : at + 8] = [node("Concat", ["f_target", *parts[layout.effect]], ["f"], axis=1)]
        inputs.append(
            helper.make_tensor_value_info(COVARIATE_INPUT, TensorProto.FLOAT, ["batch", layout.width])
        )
    graph = helper.make_graph(
        nodes,
        "global_readout",
        inputs,
        [helper.make_tensor_value_info(FORECAST_OUTPUT, TensorProto.FLOAT, ["batch", H, 1])],
        inits,
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="rsa-export"
    )
    proto.ir_version = 9
    onnx.checker.check_model(proto, full_check=True)
    return proto


def windows_of(histories: Sequence[np.ndarray], length: int) -> np.ndarray:
    """The graph's input [S, L, 1] float32: each history's last L values, the missing start NaN (the one
    window rule, rsa_core.windows)."""
    return tail_windows(histories, length, dtype=np.float32)[:, :, None]


def run_graph(
    path: Path,
    histories: Sequence[np.ndarray],
    length: int,
    covariates: np.ndarray | None = None,
    local: LocalSpec | None = None,
) -> np.ndarray:
    """ONNX Runtime's forecasts [S, H] of the graph at `path` (CPU); `covariates` [S, D] raw for a
    covariate model; a hybrid's `local` half, fed as the service's `build_feed` feeds it."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {FORECAST_INPUT: windows_of(histories, length)}
    if covariates is not None:
        feed[COVARIATE_INPUT] = np.asarray(covariates, dtype=np.float32)
    if local is not None:
        feed.update(local_inputs(local, feed[FORECAST_INPUT]))
    (out,) = session.run([FORECAST_OUTPUT], feed)
    return np.asarray(out)[:, :, 0]


def check_covariates(
    layout: CovariateLayout | None, histories: Sequence[np.ndarray], seed: int = 1
) -> np.ndarray | None:
    """Random raw covariate rows for the parity check (of any global model reading `layout`): each
    column around its training mean and spread, one-hot statics too, and the past start NaN where a
    history is shorter than L."""
    if layout is None:
        return None
    rng = np.random.default_rng(seed)
    mean, std = np.asarray(layout.mean), np.asarray(layout.std)
    raw = mean + std * rng.standard_normal((len(histories), layout.width))
    L, P = layout.input_length, len(layout.past)
    for i, h in enumerate(histories):
        missing = max(L - len(h), 0)
        raw[i, : missing * P] = np.nan
    return raw


def frequency_seconds(frequency: str | None) -> float:
    """The nominal step of a frequency alias in seconds (a calendar month: a mean month)."""
    if not frequency:
        raise ValueError("the model has no frequency (train it from a long file with timestamps)")
    calendar = CALENDAR_FREQUENCY.fullmatch(frequency)
    if calendar is not None:
        return int(calendar["months"]) * _MEAN_MONTH_S
    import pandas as pd

    return float(pd.to_timedelta(pd.tseries.frequencies.to_offset(frequency)).total_seconds())


def check_histories(input_length: int, period: int, min_history: int, seed: int = 0) -> list[np.ndarray]:
    """Histories the parity check of a global model runs on: every length from min_history to past L,
    levels from tiny to large, a constant and an all-zero series."""
    rng = np.random.default_rng(seed)
    L, p = input_length, max(period, 1)
    out = []
    for n in sorted({min_history, *range(min_history, L + 3, max(1, p // 2)), L, 2 * L}):
        t = np.arange(n)
        level = 10.0 ** rng.uniform(-2, 4)
        out.append(level * (1 + 0.3 * np.sin(2 * np.pi * t / p) + 0.1 * rng.standard_normal(n)))
    out += [np.full(L, 7.0), np.zeros(min_history)]
    return out


def verify(path: Path, model: GlobalModel) -> dict[str, Any]:
    """ONNX Runtime against `GlobalModel.forecast` on `check_histories`; raises ValueError past
    TOLERANCE."""
    histories = check_histories(model.window_length, model.config.period, model.min_history)
    covariates = check_covariates(model.covariates, histories)
    want = model.forecast(histories, covariates=covariates)
    got = run_graph(path, histories, model.window_length, covariates, model.local)
    err = np.abs(got - want) / (1.0 + np.abs(want))
    if not np.isfinite(got).all() or float(err.max()) > TOLERANCE:
        raise ValueError(f"ONNX Runtime differs from the numpy model by {float(err.max()):.3g} (relative)")
    return {"series": len(histories), "max_rel_error": float(err.max()), "tolerance": TOLERANCE}


def series_spread(model: GlobalModel, histories: Sequence[np.ndarray]) -> np.ndarray:
    """Each history's spread [S], as the service computes it from the window it forecasts
    (`window_scale`: mean |x_t − x_{t−period}| over the last L values' observed pairs): the unit of the
    pooled interval widths."""
    L, lag = model.input_length, max(model.config.period, 1)
    windows = windows_of(histories, L)
    return window_scale(windows, "mean_abs_diff", L, 1.0, [SCALE_FLOOR], lag)[:, 0, 0].astype(np.float64)


def history_groups(lengths: Sequence[int], groups: int = 3) -> list[str]:
    """Each series' group by its history length: cut at the lengths a third and two thirds of the way
    through the sorted series, so that series of one length share a group (M3 "other": two thirds of
    63 values make one group), each named by its range ("history 48-69", "history 63")."""
    n = np.asarray(lengths, dtype=np.int64)
    ordered = np.sort(n)
    cuts = [int(ordered[(len(n) * k) // groups]) for k in range(1, groups)] if len(n) else []
    index = (n[:, None] > np.asarray(cuts, dtype=np.int64)[None, :]).sum(1) if cuts else np.zeros(len(n), int)
    label = {}
    for g in sorted(set(index.tolist())):
        low, high = int(n[index == g].min()), int(n[index == g].max())
        label[g] = f"history {low}" if low == high else f"history {low}-{high}"
    return [label[int(g)] for g in index]


def group_coverage(
    inside: np.ndarray, levels: Sequence[float], groups: Sequence[str], owners: np.ndarray | None = None
) -> list[GroupCoverage]:
    """Per group (shortest histories first, then "all"): the share of values inside the interval at
    each level; `inside` [levels, rows, H] booleans, `groups` each row's group, `owners` each row's series
    (None: one row per series), so that a group counts its series, not its windows."""
    labels = np.asarray(groups, dtype=object)
    owner = np.arange(len(labels)) if owners is None else np.asarray(owners)
    out = []
    names = sorted(set(groups), key=lambda g: int(g.split()[-1].split("-")[0]) if g[-1].isdigit() else 0)
    for name in [*names, "all"]:
        rows = np.ones(len(labels), dtype=bool) if name == "all" else labels == name
        coverage = {f"{lv:g}": float(inside[i][rows].mean()) for i, lv in enumerate(levels)}
        out.append(GroupCoverage(group=name, series=len(np.unique(owner[rows])), coverage=coverage))
    return out


def _cross_coverage(
    scores: np.ndarray, levels: Sequence[float], groups: Sequence[str], folds: np.ndarray, owners: np.ndarray
) -> list[GroupCoverage]:
    """Out-of-fold coverage: the scores of fold 0 (`folds` [n], 0 or 1 per row) against widths from fold
    1's and the other way round, so that no window is scored against a width it helped set. Levels one
    fold is too small for are left out."""
    import math

    from export.conformal import conformal_quantile

    halves = [np.flatnonzero(folds == 0), np.flatnonzero(folds == 1)]
    small = min(len(h) for h in halves)
    ok = [lv for lv in levels if small and math.ceil((small + 1) * lv / 100) <= small]
    if not ok:
        return []
    inside = np.zeros((len(ok), *scores.shape), dtype=bool)
    for fold, other in ((halves[0], halves[1]), (halves[1], halves[0])):
        for i, lv in enumerate(ok):
            inside[i, fold] = scores[fold] <= conformal_quantile(scores[other], lv / 100)[None, :]
    return group_coverage(inside, ok, groups, owners)


def calibration_report(
    scores: np.ndarray,
    series: int,
    levels: list[float],
    dropped: list[float],
    why: str | None,
    before: Sequence[int],
    per_series: Sequence[int],
    windows: int | None = None,
) -> IntervalCalibration:
    """The report of a pooled calibration (the manifest's `intervals.calibration`), for every global
    model: `scores` [windows, H] of `series` series, `per_series` windows each in order, `before` each
    series' values before its windows; the coverage of `levels` out of fold (`_folds`) per history-length
    group (`history_groups`), and the levels `dropped` with `why`."""
    owners = np.repeat(np.arange(len(per_series)), per_series)
    groups = np.repeat(history_groups(before), per_series).tolist()
    return IntervalCalibration(
        series=series,
        levels=levels,
        dropped_levels=dropped,
        dropped_because=why,
        coverage=_cross_coverage(scores, levels, groups, _folds(per_series), owners),
        windows=windows,
    )


def _folds(per_series: Sequence[int]) -> np.ndarray:
    """Each calibration window's fold: its series' parity (every other series), or with one series the
    earlier and the later half of its windows."""
    if len(per_series) == 1:
        n = per_series[0]
        return (np.arange(n) >= n // 2).astype(np.int64)
    return np.repeat(np.arange(len(per_series)) % 2, per_series)


def windows_needed(level: float) -> int:
    """The fewest calibration windows that calibrate `level` (percent, below 100): the least n with
    ceil((n + 1)·level/100) <= n (99 for 99%, 19 for 95%)."""
    from app.artifacts.conformal import level_fits

    n = 1
    while not level_fits(n, level):
        n += 1
    return n


def calibration_tail(
    lengths: Sequence[int], horizon: int, min_history: int, train_min: int, levels: Sequence[float]
) -> tuple[Callable[[int], int], int]:
    """How many of its last values each series of n holds out to calibrate on, and the windows each
    holds (k): its last H (k = 1: one window per series, the rule for many series) while the series long
    enough to hold one are as many as the highest level asked needs windows (99 for 99%); fewer series,
    each holds out its last H + k − 1 values, the k rolling windows whose H targets lie there (as the
    service's fit on request calibrates), k = the windows that level needs / the series, rounded up. A
    series holds out at most half its values, and never its last training window (train_min + H values
    stay before the tail), so a short one may give fewer."""
    H = horizon
    count = sum(1 for n in lengths if n >= min_history + H)
    need = max((windows_needed(lv) for lv in levels if lv < 100), default=1)
    k = 1 if count == 0 or count >= need else math.ceil(need / count)

    def tail(n: int) -> int:
        return max(H, min(H + k - 1, n // 2, n - train_min - H))

    return tail, k


def readout_spec(model: GlobalModel) -> ReadoutSpec:
    """What a refit of `model` needs (the manifest's `readout` block): its REM heads expanded, its input
    length, min_history and fit settings."""
    cfg = model.config
    heads = tuple((str(k), int(d), float(v), float(t)) for k, d, v, t in expand_bank(cfg.spec, cfg.period))
    return ReadoutSpec(heads, model.input_length, model.min_history, cfg.fit_settings)


def calibrate_global(
    model: GlobalModel, series: Sequence[Any], levels: Sequence[float] = DEFAULT_LEVELS
) -> tuple[dict[str, Any] | None, str]:
    """Split-conformal intervals pooled across series, each scaled by its own seasonal-naive error:
    (the manifest's `intervals` or None, a sentence saying what was calibrated or why nothing was).

    Every series long enough keeps its last values out (`calibration_tail`: its last H, one window per
    series, when the series are as many as the highest level needs windows; fewer series hold out more,
    k rolling windows each, as the service's fit on request does, so that one series gets 80, 90 and 95%);
    a read-out of the same settings and input length is fitted on what comes before and forecasts every
    window whose H targets lie in the held-out values (app/artifacts/readout.py's `calibrate`: the
    service's fit on request calibrates with the same code). Each window's absolute errors are divided
    by the spread the service computes from the same window (`series_spread`), and per horizon step the
    conformal quantile of the n pooled scores is the width, in units of that spread. A level needs
    ceil((n + 1)·level) <= n windows. The calibration report (`IntervalCalibration`, in the manifest's
    `intervals.calibration`) gives the coverage per history-length group, out of fold (every other
    series; one series: the earlier and the later half of its windows)."""
    from export.covariates import CovariateSeries, series_covariate_rows

    H, layout = model.config.horizon, model.covariates
    if layout is not None and not all(isinstance(v, CovariateSeries) for v in series):
        raise ValueError("a covariate model is calibrated on series with their covariates (CovariateSeries)")
    values = [np.asarray(v.values if isinstance(v, CovariateSeries) else v, dtype=np.float64) for v in series]
    rows = (
        None
        if layout is None
        else CovariateRows(layout, lambda i, ends: series_covariate_rows(series[i], layout, ends))
    )
    cfg = model.config
    tail, k = calibration_tail([len(v) for v in values], H, model.min_history, cfg.train_min, levels)
    # One window per series (many series): the widths corrected for the drift to the last origin (issue 43)
    spec = readout_spec(model)
    cal = calibrate(values, spec, levels, tail=tail, covariates=rows, local=model.local, drift=k == 1)
    n = cal.series
    lengths = [len(v) for v in values if len(v) >= model.min_history + H] or [0]
    what = (
        f"{n} series' last {H} values"
        if k == 1
        else f"{cal.windows} rolling windows over the last {max(map(tail, lengths))} values (at most) of "
        f"{n} series"
    )
    if cal.intervals is None:
        return (
            None,
            f"no interval: {what} after min_history = {model.min_history} are too few for any of "
            f"{list(levels)} (a level needs ceil((n + 1)·level) <= n windows)",
        )
    ok = list(cal.intervals["levels"])
    dropped = [lv for lv in levels if lv not in ok]
    why = (
        f"{dropped} need more than the {n} series that hold {H} values out after min_history = "
        f"{model.min_history} (a level needs ceil((n + 1)·level) <= n)"
        if dropped and k == 1
        else f"{dropped} need more than the {cal.windows} windows (a level needs ceil((n + 1)·level) <= n)"
        if dropped
        else None
    )
    before = [m - H for m in lengths]  # each series' values before its last window
    report = calibration_report(cal.scores, n, ok, dropped, why, before, cal.per_series, cal.windows)
    intervals = {**cal.intervals, "calibration": to_dict(report)}
    rule = cal.intervals["calibration"]  # the rule the widths were set by (readout.calibrate's drift)
    intervals["calibration"].update({key: rule[key] for key in ("rule", "drift") if key in rule})
    return intervals, f"intervals at {ok} from {what}" + (f"; {why}" if why else "")


def interval_halfwidths(
    intervals: dict[str, Any], model: GlobalModel, histories: Sequence[np.ndarray]
) -> np.ndarray:
    """The half-widths [levels, S, H] the service would answer for these histories: each level's
    pooled width per step times each history's spread (`series_spread`)."""
    widths = np.asarray(intervals["widths"], dtype=np.float64)[:, :, 0]  # [levels, H]
    return widths[:, None, :] * series_spread(model, histories)[None, :, None]


def panel_manifest(
    *,
    name: str,
    version: int,
    kind: str,
    description: str,
    input_length: int,
    horizon: int,
    channel: str,
    frequency: str | None,
    timezone: str | None,
    min_history: int,
    period: int,
    layout: CovariateLayout | None,
    files: dict[str, Any],
    intervals: dict[str, Any] | None,
    local: LocalSpec | None = None,
) -> dict[str, Any]:
    """What every global model's manifest holds (the read-out's and the transformer's): the graph's
    inputs (`window`, and `covariates` for a covariate model) and output, the frequency and zone, the
    `panel` block the service serves it by, the files and the intervals."""
    L, H = input_length, horizon
    return {
        "name": name,
        "version": version,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "kind": kind,
        "description": description,
        "input_length": L,
        "horizon": H,
        "channels": [channel],
        "frequency": frequency,
        **({} if timezone is None else {"timezone": timezone}),
        "frequency_seconds": frequency_seconds(frequency),
        "inputs": [{"name": FORECAST_INPUT, "dtype": "float32", "shape": ["batch", L, 1]}]
        + (
            []
            if layout is None
            else [{"name": COVARIATE_INPUT, "dtype": "float32", "shape": ["batch", layout.width]}]
        )
        + (
            []
            if local is None
            else [
                {"name": LOCAL_INPUT, "dtype": "float32", "shape": ["batch", H]},
                {"name": LOCAL_WEIGHT_INPUT, "dtype": "float32", "shape": ["batch", 1]},
            ]
        ),
        "outputs": [{"name": FORECAST_OUTPUT, "dtype": "float32", "shape": ["batch", H, 1]}],
        "panel": {
            "min_history": min_history,
            "period": period,
            "missing": "nan",
            **({} if layout is None else {"covariates": {**layout.to_json(), "list": layout.describe()}}),
            **({} if local is None else {"local": local.to_json()}),
        },
        "opset": OPSET,
        "files": files,
        # null without the training series to calibrate on (`export --data`)
        "intervals": intervals,
    }


def manifest_of(
    model: GlobalModel,
    name: str,
    version: int,
    channel: str,
    files: dict[str, Any],
    intervals: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cfg = model.config
    manifest = panel_manifest(
        name=name,
        version=version,
        kind=GLOBAL_KIND,
        description=(
            f"A global REM read-out (closed-form ridge over a fixed REM bank) of period {cfg.period}"
            + (
                ""
                if model.local is None
                else f", averaged with {' and '.join(model.local.members)} fitted per series on the last "
                f"{model.local.length} values (the read-out's weight {1 - model.local.share:.3g})"
            )
            + f": forecasts any {model.frequency} series of at least {model.min_history} values, seen in "
            "training or not."
        ),
        input_length=model.window_length,
        horizon=cfg.horizon,
        channel=channel,
        frequency=model.frequency,
        timezone=model.timezone,
        min_history=model.min_history,
        period=cfg.period,
        layout=model.covariates,
        files=files,
        intervals=intervals,
        local=model.local,
    )
    # What the service's fit on request (/v1/.../fit_forecast) refits with (app/artifacts/readout.py).
    manifest["readout"] = readout_spec(model).to_json()
    if model.training is not None:  # the training data's end: a backtest's in-sample cutoffs
        manifest["panel"]["training"] = model.training
    manifest["architecture"] = {
        "config": model.to_json()["config"],
        "input_length": model.input_length,
        "search": model.search,
        **({"covariate_report": model.covariate_report} if model.covariate_report else {}),
    }
    return manifest


def export_global(
    model: GlobalModel,
    repository: Path,
    name: str,
    version: int | None = None,
    channel: str = "y",
    intervals: dict[str, Any] | None = None,
    dataset: dict[str, Any] | None = None,
) -> Path:
    """Build the graph, check it against the numpy model, publish a version (with `intervals` from
    `calibrate_global`, or none); returns its folder. `dataset`: the manifest's `dataset` block (what the
    model was trained on: export/pretrained.py names the data's origin and licence there)."""
    import onnx

    from app.artifacts.repository import sha256_of

    def write(staging: Path, number: int) -> None:
        path = staging / MODEL_FILE
        onnx.save(global_graph(model), str(path))
        verification = verify(path, model)
        files = {MODEL_FILE: {"sha256": sha256_of(path), "bytes": path.stat().st_size}}
        manifest = manifest_of(model, name, number, channel, files, intervals)
        manifest["verification"] = {"provider": "CPUExecutionProvider", **verification}
        if dataset is not None:
            manifest["dataset"] = dataset
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")

    return publish_version(Path(repository) / name, write, version)
