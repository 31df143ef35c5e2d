"""A global REM read-out (export/panel.py's `GlobalModel`) as an ONNX graph and a served model version.

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
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.artifacts.contract import (
    CALENDAR_FREQUENCY,
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    MANIFEST_FILE,
    MODEL_FILE,
)
from app.artifacts.readout import TINY as _TINY  # the scale's fallback threshold, as the numpy model's
from app.artifacts.readout import ReadoutSpec, calibrate
from export.bank import expand_bank
from export.publish import publish_version

if TYPE_CHECKING:  # export/panel.py's CLI imports this module
    from export.panel import GlobalModel

__all__ = [
    "DEFAULT_LEVELS",
    "GLOBAL_KIND",
    "OPSET",
    "TOLERANCE",
    "calibrate_global",
    "export_global",
    "global_graph",
    "readout_spec",
    "run_graph",
]

GLOBAL_KIND = "global_readout"  # the manifest's `kind`
OPSET = 18
# float32 graph against the float64 numpy model: |onnx − numpy| <= TOLERANCE · (1 + |numpy|).
TOLERANCE = 1e-4
_MEAN_MONTH_S = 365.2425 * 86_400 / 12  # a calendar month's nominal seconds (export/data/timestamps.py)
DEFAULT_LEVELS = (50.0, 80.0, 90.0, 95.0, 99.0)  # as the multichannel exporter's


def _const(name: str, value: np.ndarray | float, dtype: Any = np.float32) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def global_graph(model: GlobalModel) -> Any:
    """The forecast graph of `model`: `window` float32 [batch, L, 1] (NaN where the history has not
    started) -> `forecast` float32 [batch, H, 1], on the raw scale."""
    import onnx
    from onnx import TensorProto, helper

    cfg, L, H = model.config, model.input_length, model.config.horizon
    last = max(cfg.period, 1)
    kernels = model.kernels()  # [K, L]
    lags = np.zeros((L, cfg.n_lags))
    lags[L - cfg.n_lags + np.arange(cfg.n_lags), np.arange(cfg.n_lags)] = 1.0  # the last n_lags steps
    feature_matrix = np.concatenate([kernels.T, lags], 1)  # [L, K + n_lags]
    sums = np.zeros((L, 2))  # column 0: the last cycle's steps; column 1: every step
    sums[L - last :, 0] = 1.0
    sums[:, 1] = 1.0
    inits = [
        _const("shape_in", [-1, L], np.int64),
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
        node("Reshape", [FORECAST_INPUT, "shape_in"], ["x"]),  # [B, L]
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
        node("Concat", ["features", "missing_share"], ["f"], axis=1),  # [B, F]
        node("MatMul", ["f", "readout"], ["y0"]),  # [B, H]
        node("Add", ["y0", "bias"], ["y"]),
        node("Mul", ["y", "scale"], ["raw"]),  # back to the raw scale
        node("Reshape", ["raw", "shape_out"], [FORECAST_OUTPUT]),  # [B, H, 1]
    ]
    graph = helper.make_graph(
        nodes,
        "global_readout",
        [helper.make_tensor_value_info(FORECAST_INPUT, TensorProto.FLOAT, ["batch", L, 1])],
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
    """The graph's input [S, L, 1] float32: each history's last L values, the missing start NaN."""
    out = np.full((len(histories), length, 1), np.nan, dtype=np.float32)
    for i, h in enumerate(histories):
        tail = np.asarray(h, dtype=np.float64)[-length:]
        out[i, length - len(tail) :, 0] = tail
    return out


def run_graph(path: Path, histories: Sequence[np.ndarray], length: int) -> np.ndarray:
    """ONNX Runtime's forecasts [S, H] of the graph at `path` (CPU)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run([FORECAST_OUTPUT], {FORECAST_INPUT: windows_of(histories, length)})
    return np.asarray(out)[:, :, 0]


def frequency_seconds(frequency: str | None) -> float:
    """The nominal step of a frequency alias in seconds (a calendar month: a mean month)."""
    if not frequency:
        raise ValueError("the model has no frequency (train it from a long file with timestamps)")
    calendar = CALENDAR_FREQUENCY.fullmatch(frequency)
    if calendar is not None:
        return int(calendar["months"]) * _MEAN_MONTH_S
    import pandas as pd

    return float(pd.to_timedelta(pd.tseries.frequencies.to_offset(frequency)).total_seconds())


def _check_histories(model: GlobalModel, seed: int = 0) -> list[np.ndarray]:
    """Histories the parity check runs on: every length from min_history to past L, levels from tiny to
    large, a constant and an all-zero series."""
    rng = np.random.default_rng(seed)
    L, p = model.input_length, max(model.config.period, 1)
    out = []
    for n in sorted({model.min_history, *range(model.min_history, L + 3, max(1, p // 2)), L, 2 * L}):
        t = np.arange(n)
        level = 10.0 ** rng.uniform(-2, 4)
        out.append(level * (1 + 0.3 * np.sin(2 * np.pi * t / p) + 0.1 * rng.standard_normal(n)))
    out += [np.full(L, 7.0), np.zeros(model.min_history)]
    return out


def verify(path: Path, model: GlobalModel) -> dict[str, Any]:
    """ONNX Runtime against `GlobalModel.forecast` on `_check_histories`; raises ValueError past
    TOLERANCE."""
    histories = _check_histories(model)
    want = model.forecast(histories)
    got = run_graph(path, histories, model.input_length)
    err = np.abs(got - want) / (1.0 + np.abs(want))
    if not np.isfinite(got).all() or float(err.max()) > TOLERANCE:
        raise ValueError(f"ONNX Runtime differs from the numpy model by {float(err.max()):.3g} (relative)")
    return {"series": len(histories), "max_rel_error": float(err.max()), "tolerance": TOLERANCE}


def readout_spec(model: GlobalModel) -> ReadoutSpec:
    """What a refit of `model` needs (the manifest's `readout` block): its REM heads expanded, its input
    length, min_history and fit settings."""
    cfg = model.config
    heads = tuple((str(k), int(d), float(v), float(t)) for k, d, v, t in expand_bank(cfg.spec, cfg.period))
    return ReadoutSpec(heads, model.input_length, model.min_history, cfg.fit_settings)


def calibrate_global(
    model: GlobalModel, series: Sequence[np.ndarray], levels: Sequence[float] = DEFAULT_LEVELS
) -> tuple[dict[str, Any] | None, str]:
    """Split-conformal intervals pooled across series, each scaled by its own seasonal-naive error:
    (the manifest's `intervals` or None, a sentence saying what was calibrated or why nothing was).

    Every series long enough keeps its last H values out; a read-out of the same settings and input
    length is fitted on what comes before and forecasts them (app/artifacts/readout.py's `calibrate`
    with a tail of H: the service's fit on request calibrates with the same code). Each series' absolute
    errors are divided by the spread the service computes from the same window (`window_scale`:
    mean |x_t − x_{t−period}| over the window's observed values, lag 1 where no pair a period apart),
    and per horizon step the conformal quantile of the n pooled scores is the width, in units of that
    spread. A level needs ceil((n + 1)·level) <= n series."""
    H = model.config.horizon
    cal = calibrate(series, readout_spec(model), levels, tail=lambda n: H)
    n = cal.series
    if cal.intervals is None:
        return (
            None,
            f"no interval: {n} series hold {H} values out after min_history, too few for {list(levels)}",
        )
    ok, dropped = cal.intervals["levels"], list(cal.dropped)
    why = f"; {dropped} need more than {n} series" if dropped else ""
    return cal.intervals, f"intervals at {ok} from {n} series' last {H} values{why}"


def manifest_of(
    model: GlobalModel,
    name: str,
    version: int,
    channel: str,
    files: dict[str, Any],
    intervals: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cfg, L, H = model.config, model.input_length, model.config.horizon
    return {
        "name": name,
        "version": version,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "kind": GLOBAL_KIND,
        "description": (
            f"A global REM read-out (closed-form ridge over a fixed REM bank) of period {cfg.period}: "
            f"forecasts any {model.frequency} series of at least {model.min_history} values, seen in "
            "training or not."
        ),
        "input_length": L,
        "horizon": H,
        "channels": [channel],
        "frequency": model.frequency,
        "frequency_seconds": frequency_seconds(model.frequency),
        "inputs": [{"name": FORECAST_INPUT, "dtype": "float32", "shape": ["batch", L, 1]}],
        "outputs": [{"name": FORECAST_OUTPUT, "dtype": "float32", "shape": ["batch", H, 1]}],
        "panel": {"min_history": model.min_history, "period": cfg.period, "missing": "nan"},
        # What the service's fit on request (/v1/.../fit_forecast) refits with (app/artifacts/readout.py).
        "readout": readout_spec(model).to_json(),
        "architecture": {"config": model.to_json()["config"], "input_length": L, "search": model.search},
        "opset": OPSET,
        "files": files,
        # null without the training series to calibrate on (`export --data`)
        "intervals": intervals,
    }


def export_global(
    model: GlobalModel,
    repository: Path,
    name: str,
    version: int | None = None,
    channel: str = "y",
    intervals: dict[str, Any] | None = None,
) -> Path:
    """Build the graph, check it against the numpy model, publish a version (with `intervals` from
    `calibrate_global`, or none); returns its folder."""
    import onnx

    from app.artifacts.repository import sha256_of

    def write(staging: Path, number: int) -> None:
        path = staging / MODEL_FILE
        onnx.save(global_graph(model), str(path))
        verification = verify(path, model)
        files = {MODEL_FILE: {"sha256": sha256_of(path), "bytes": path.stat().st_size}}
        manifest = manifest_of(model, name, number, channel, files, intervals)
        manifest["verification"] = {"provider": "CPUExecutionProvider", **verification}
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")

    return publish_version(Path(repository) / name, write, version)
