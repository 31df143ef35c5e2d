"""A global REM read-out (export/global_models/model.py's `GlobalModel`) as an ONNX graph, run and checked.

The whole forecast runs inside the graph, so the service feeds nothing but windows: each window's scale
(the mean |value| of its last cycle), the REM features as one MatMul with a constant kernel matrix [L, F]
(the bank's last rows plus the lag selection), the share of the window that is missing, the ridge
read-out and the un-scaling. A history shorter than L is fed with its missing start as NaN: the graph
masks those steps (they read as 0, and their share is a feature) exactly as `GlobalModel.forecast` does,
so nothing is ever filled with invented values (docs/artifacts.md, "Global models"). `verify` checks
ONNX Runtime against the numpy model before anything is published (export/global_models/onnx.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from app.artifacts.contract import (
    CALENDAR_FREQUENCY,
    COVARIATE_INPUT,
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    LOCAL_INPUT,
    LOCAL_WEIGHT_INPUT,
)
from app.artifacts.feed import local_inputs
from app.artifacts.readout import PARITY_TOLERANCE, PARITY_UNIT, Lift, random_layer, scale_errors
from app.artifacts.readout import STILL_SHARE as _STILL_SHARE  # a still window's, as the numpy model's
from app.artifacts.readout import TINY as _TINY  # the scale's fallback threshold, as the numpy model's
from rsa_core.windows import tail_windows

if TYPE_CHECKING:
    from app.artifacts.covariates import CovariateLayout
    from app.artifacts.hybrid import LocalSpec
    from export.global_models.model import GlobalModel

__all__ = [
    "OPSET",
    "TOLERANCE",
    "check_covariates",
    "check_histories",
    "check_parity",
    "frequency_seconds",
    "global_graph",
    "run_graph",
    "verify",
    "windows_of",
]

OPSET = 18
TOLERANCE = PARITY_TOLERANCE  # in units of PARITY_UNIT (app/artifacts/readout/windows.py)
_MEAN_MONTH_S = 365.2425 * 86_400 / 12  # a calendar month's nominal seconds (export/data/timestamps.py)


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

    H, W = model.config.horizon, model.window_length
    kernels = model.kernels()  # [K, L]
    inits = _target_constants(model, kernels)
    nodes = _target_nodes()
    if model.fit_settings.mirror:
        _mirror(nodes, inits)
    node = helper.make_node
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
    at = next(i for i, n in enumerate(nodes) if n.output[0] == "f_target") + 1
    if model.lift is not None:  # the random layer's outputs after the features (readout.Lift)
        nodes[at - 1].output[0] = "f_base"
        inits += _lift_constants(model.lift)
        lifted = [
            node("Sub", ["f_base", "lift_mean"], ["lift_centred"]),
            node("Div", ["lift_centred", "lift_std"], ["lift_z"]),
            node("MatMul", ["lift_z", "lift_matrix"], ["lift_pre0"]),
            node("Add", ["lift_pre0", "lift_bias"], ["lift_pre"]),
            node("Relu", ["lift_pre"], ["lift_out"]),
            node("Concat", ["f_base", "lift_out"], ["f_target"], axis=1),
        ]
        nodes[at:at] = lifted
        at += len(lifted)
    if model.covariates is None:
        nodes.insert(at, node("Identity", ["f_target"], ["f"]))
        _hold_still(model, nodes, inits)
    else:
        _add_covariates(model.covariates, kernels, nodes, inits, inputs, at)
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


def _target_constants(model: GlobalModel, kernels: np.ndarray) -> list[Any]:
    """The graph's constants for the target's part: shapes, the last cycle's and every step's sums, the
    REM kernels' last rows with the lag selection, and the read-out's weights and bias."""
    cfg, L, H, W = model.config, model.input_length, model.config.horizon, model.window_length
    last = max(cfg.period, 1)
    lags = np.zeros((L, cfg.n_lags))
    lags[L - cfg.n_lags + np.arange(cfg.n_lags), np.arange(cfg.n_lags)] = 1.0  # the last n_lags steps
    feature_matrix = np.concatenate([kernels.T, lags], 1)  # [L, K + n_lags]
    sums = np.zeros((L, 2))  # column 0: the last cycle's steps; column 1: every step
    sums[L - last :, 0] = 1.0
    sums[:, 1] = 1.0
    return [
        _const("shape_in", [-1, W], np.int64),
        _const("keep_from", [W - L], np.int64),  # a hybrid's window is longer than the read-out's L
        _const("keep_to", [W], np.int64),
        _const("keep_axis", [1], np.int64),
        _const("shape_out", [-1, H, 1], np.int64),
        _const("zero", 0.0),
        _const("one", 1.0),
        _const("tiny", _TINY),
        # read by the still-window rule alone (`_hold_still`), which a covariate graph has not
        *([_const("still_share", _STILL_SHARE)] if model.covariates is None else []),
        _const("sums", sums),
        _const("pick_last", [[1.0], [0.0]]),
        _const("pick_whole", [[0.0], [1.0]]),
        _const("mean_of_steps", np.full((L, 1), 1.0 / L)),
        _const("rem_features", feature_matrix),  # the REM kernels' last rows and the lags, [L, F - 1]
        _const("readout", model.weights[:-1]),  # [F, H]
        _const("bias", model.weights[-1]),  # [H]
    ]


def _lift_constants(lift: Lift) -> list[Any]:
    """The random layer's constants: the standardisation and the layer (readout.Lift's, as it draws it)."""
    R, b = random_layer(len(lift.mean), lift.width, lift.seed)
    return [
        _const("lift_mean", lift.mean),
        _const("lift_std", lift.std),
        _const("lift_matrix", R),
        _const("lift_bias", b),
    ]


def _target_nodes() -> list[Any]:
    """The target's nodes: the window's last L values masked where missing, its scale, the features, the
    read-out and the un-scaling (`f` is the read-out's input: the target's features `f_target`, with a
    covariate model's beside them; `out` the forecast before its reshape)."""
    from onnx import TensorProto, helper

    node = helper.make_node
    return [
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
        # What the forecast is multiplied back by: the scale, 0 for an all-zero window (readout's
        # output_scales: it forecasts zeros).
        node("Where", ["any_ok", "s_any", "zero"], ["scale_out"]),
        node("Div", ["x0", "scale"], ["u"]),  # [B, L] normalised, 0 where missing
        node("MatMul", ["u", "rem_features"], ["features"]),  # [B, F - 1]
        node("MatMul", ["mask", "mean_of_steps"], ["observed_share"]),  # [B, 1]
        node("Sub", ["one", "observed_share"], ["missing_share"]),
        node("Concat", ["features", "missing_share"], ["f_target"], axis=1),  # [B, F]
        node("MatMul", ["f", "readout"], ["y0"]),  # [B, H]
        node("Add", ["y0", "bias"], ["y"]),
        node("Mul", ["y", "scale_out"], ["raw"]),  # back to the raw scale
        node("Reshape", ["out", "shape_out"], [FORECAST_OUTPUT]),  # [B, H, 1]
    ]


def _mirror(nodes: list[Any], inits: list[Any]) -> None:
    """The scale signed, in place (readout.window_scales with `mirror`): negative where the mean of the
    window's last cycle's observed values (its whole window's where `_level` falls back) is below zero, so
    that the read-out reads such a window as its mirror image and its forecast is mirrored back."""
    from onnx import helper

    node = helper.make_node
    inits.append(_const("minus_one", -1.0))
    for n in nodes:
        if n.output[0] in ("scale", "scale_out"):
            n.output[0] += "_abs"
    signed = [
        node("MatMul", ["x0", "sums"], ["signed_sums"]),  # [B, 2]: the last cycle's and the window's
        node("Div", ["signed_sums", "counts1"], ["signed_means"]),
        node("MatMul", ["signed_means", "pick_last"], ["m_last"]),  # [B, 1]
        node("MatMul", ["signed_means", "pick_whole"], ["m_whole"]),
        node("Where", ["last_ok", "m_last", "m_whole"], ["m_any"]),
        node("Less", ["m_any", "zero"], ["below"]),
        node("Where", ["below", "minus_one", "one"], ["sign"]),
        node("Mul", ["scale_abs", "sign"], ["scale"]),
        node("Mul", ["scale_out_abs", "sign"], ["scale_out"]),
    ]
    at = next(i for i, n in enumerate(nodes) if n.output[0] == "scale_out_abs") + 1
    nodes[at:at] = signed


def _hold_still(model: GlobalModel, nodes: list[Any], inits: list[Any]) -> None:
    """A still window's forecast, its last cycle repeated (readout.hold_still: the mean |x_t − x_{t−lag}|
    over observed pairs, lag the period or 1 where no pair a period apart is observed, within
    STILL_SHARE of the mean |value|), added in place: the read-out's `raw` becomes `raw_readout`, `raw`
    the held one."""
    from onnx import helper

    node = helper.make_node
    L, H, period = model.input_length, model.config.horizon, max(model.config.period, 1)
    inits += [_const("start", [0], np.int64)]
    held: list[Any] = []

    def change(lag: int) -> tuple[str, str]:
        """Nodes of the mean |x_t − x_{t−lag}| over observed pairs [B, 1] (`pairs_{lag}` counts them) and
        of the last `lag` values repeated [B, H]; their names."""
        inits.extend([_const(f"from_{lag}", [lag], np.int64), _const(f"to_{lag}", [L - lag], np.int64)])
        inits.append(_const(f"cycle_{lag}", L - lag + np.arange(H) % lag, np.int64))  # [H]
        a, b = f"from_{lag}", f"to_{lag}"
        held.extend(
            [
                node("Slice", ["x0", a, "keep_to", "keep_axis"], [f"later_{lag}"]),  # [B, L - lag]
                node("Slice", ["x0", "start", b, "keep_axis"], [f"earlier_{lag}"]),
                node("Slice", ["mask", a, "keep_to", "keep_axis"], [f"m_later_{lag}"]),
                node("Slice", ["mask", "start", b, "keep_axis"], [f"m_earlier_{lag}"]),
                node("Mul", [f"m_later_{lag}", f"m_earlier_{lag}"], [f"both_{lag}"]),
                node("Sub", [f"later_{lag}", f"earlier_{lag}"], [f"delta_{lag}"]),
                node("Abs", [f"delta_{lag}"], [f"abs_delta_{lag}"]),
                node("Mul", [f"abs_delta_{lag}", f"both_{lag}"], [f"moved_{lag}"]),
                node("ReduceSum", [f"moved_{lag}", "keep_axis"], [f"moved_sum_{lag}"], keepdims=1),
                node("ReduceSum", [f"both_{lag}", "keep_axis"], [f"pairs_{lag}"], keepdims=1),
                node("Max", [f"pairs_{lag}", "one"], [f"pairs1_{lag}"]),
                node("Div", [f"moved_sum_{lag}", f"pairs1_{lag}"], [f"change_{lag}"]),  # [B, 1]
                node("Gather", ["x0", f"cycle_{lag}"], [f"last_cycle_{lag}"], axis=1),  # [B, H]
            ]
        )
        return f"change_{lag}", f"last_cycle_{lag}"

    moved, cycle = change(1)
    if 1 < period < L:  # the period's lag where the window holds a pair a period apart, else 1's
        moved_p, cycle_p = change(period)
        held += [
            node("Greater", [f"pairs_{period}", "zero"], ["paired"]),
            node("Where", ["paired", moved_p, moved], ["change"]),
            node("Where", ["paired", cycle_p, cycle], ["cycle"]),
        ]
        moved, cycle = "change", "cycle"
    held += [
        node("MatMul", ["means", "pick_whole"], ["mean_abs"]),  # [B, 1]: the window's mean |value|
        node("Mul", ["mean_abs", "still_share"], ["allowed"]),
        node("LessOrEqual", [moved, "allowed"], ["still"]),
        node("Where", ["still", cycle, "raw_readout"], ["raw"]),
    ]
    at = next(i for i, n in enumerate(nodes) if n.output[0] == "raw")
    nodes[at].output[0] = "raw_readout"
    nodes[at + 1 : at + 1] = held


def _add_covariates(
    layout: CovariateLayout,
    kernels: np.ndarray,
    nodes: list[Any],
    inits: list[Any],
    inputs: list[Any],
    at: int,
) -> None:
    """A covariate model's part, added in place: its rows standardised (NaN read as 0), read linearly
    (`layout.readout_matrix`) and concatenated to the target's features as `layout.effect` says."""
    from onnx import TensorProto, helper

    node = helper.make_node
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
    inputs.append(helper.make_tensor_value_info(COVARIATE_INPUT, TensorProto.FLOAT, ["batch", layout.width]))


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
    still_length: int | None = None,
) -> np.ndarray:
    """ONNX Runtime's forecasts [S, H] of the graph at `path` (CPU); `covariates` [S, D] raw for a
    covariate model; a hybrid's `local` half, fed as the service's `build_feed` feeds it (`still_length`:
    its read-out's input length, LocalSpec.feed's)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {FORECAST_INPUT: windows_of(histories, length)}
    if covariates is not None:
        feed[COVARIATE_INPUT] = np.asarray(covariates, dtype=np.float32)
    if local is not None:
        feed.update(local_inputs(local, feed[FORECAST_INPUT], still_length))
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
    levels from tiny to large, a constant, an all-zero and a periodic series."""
    rng = np.random.default_rng(seed)
    L, p = input_length, max(period, 1)
    out = []
    for n in sorted({min_history, *range(min_history, L + 3, max(1, p // 2)), L, 2 * L}):
        t = np.arange(n)
        level = 10.0 ** rng.uniform(-2, 4)
        out.append(level * (1 + 0.3 * np.sin(2 * np.pi * t / p) + 0.1 * rng.standard_normal(n)))
    cycle = 50.0 + 10.0 * np.arange(p)  # a window of one cycle repeated: forecast as that cycle
    out += [np.full(L, 7.0), np.zeros(min_history), np.tile(cycle, L // p + 2)]
    return out


def verify(path: Path, model: GlobalModel) -> dict[str, Any]:
    """ONNX Runtime against `GlobalModel.forecast` on `check_histories`; raises ValueError past
    TOLERANCE."""
    histories = check_histories(model.window_length, model.config.period, model.min_history)
    covariates = check_covariates(model.covariates, histories)
    want = model.forecast(histories, covariates=covariates)
    got = run_graph(path, histories, model.window_length, covariates, model.local, model.input_length)
    return check_parity(
        got, want, histories, model.input_length, model.config.period, "the numpy model", TOLERANCE
    )


def check_parity(
    got: np.ndarray,
    want: np.ndarray,
    histories: Sequence[np.ndarray],
    length: int,
    period: int,
    reference: str,
    tolerance: float,
) -> dict[str, Any]:
    """A graph's forecasts `got` [S, H] against its `reference`'s `want` on `histories`: the manifest's
    `verification` block, or ValueError past `tolerance` in units of PARITY_UNIT (`scale_errors`); a
    forecast that is not finite fails. The global read-out's check and the transformer's."""
    err = scale_errors(got, want, histories, length, period)
    worst = float(err.max()) if np.isfinite(got).all() else float("inf")
    if not worst <= tolerance:
        raise ValueError(
            f"ONNX Runtime differs from {reference} by {worst:.3g} in units of {PARITY_UNIT} "
            f"(tolerance {tolerance}); nothing published"
        )
    return {
        "series": len(histories),
        "max_error": worst,
        "max_abs_error": float(np.abs(got - want).max()),
        "in_units_of": PARITY_UNIT,
        "tolerance": tolerance,
    }
