"""Fake model versions that follow docs/artifacts.md exactly, built with onnx.helper and numpy (no torch).

forecast[b, h, c] = Σ_t window[b, t, c]·W[t, h] + bias[c]   (a per-channel linear map over time)
attn_softmax      = softmax over j of scale[n, h]·x[b, c, i]·x[b, c, j]   (input-dependent, rows sum to 1)
attn_rem          = a constant REM per head (λ^|i−j| off the diagonal for a regular head, zeros for softmax)
attn_mixed        = (1 − g)·attn_softmax + g·attn_rem, computed in the graph from the manifest's gates

With a cycle of period P (`ToySpec.cycle_period`), CycleNet style: the graphs take `phase` [batch] (int64)
and a constant Q [P, C]; window[b, t] − Q[(phase[b] + t) mod P] goes through the network above (so the
attention depends on the phase too) and Q[(phase[b] + L + h) mod P] is added to forecast row h.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from app.engine.batching import DynamicBatcher, Feed
from tests.utils.batching import replace_run

OPSET = 18


@dataclass(frozen=True)
class HeadDef:
    kind: str  # regular | cyclic_cos | cyclic_sin | softmax
    gate: float
    lam: float | None = None
    gamma: float | None = None
    theta: float | None = None
    dilation: int = 1


DEFAULT_HEADS = (HeadDef("regular", gate=0.4, lam=0.7), HeadDef("softmax", gate=0.0))


@dataclass(frozen=True)
class ToySpec:
    name: str = "toy"
    version: int = 1
    input_length: int = 8
    horizon: int = 4
    channels: tuple[str, ...] = ("HUFL", "MUFL", "OT")
    n_layers: int = 1
    heads: tuple[HeadDef, ...] = DEFAULT_HEADS
    frequency: str = "1h"
    frequency_seconds: int = 3600
    seed: int | None = None  # None: derived from the version, so versions differ
    cycle_period: int | None = None  # a seasonal cycle of this many steps of frequency_seconds
    manifest_overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def n_heads(self) -> int:
        return len(self.heads)


def rem_matrix(head: HeadDef, length: int) -> np.ndarray:
    """Unmasked REM (rsa.md §2): f(|i−j|/d) where d divides i−j, zero diagonal, zeros for softmax heads."""
    lag = np.abs(np.subtract.outer(np.arange(length), np.arange(length)))
    out = np.zeros((length, length), np.float64)
    mask = (lag > 0) & (lag % head.dilation == 0)
    steps = lag[mask] // head.dilation
    if head.kind == "regular":
        assert head.lam is not None
        out[mask] = head.lam**steps
    elif head.kind in ("cyclic_cos", "cyclic_sin"):
        assert head.gamma is not None and head.theta is not None
        wave = np.cos if head.kind == "cyclic_cos" else np.sin
        out[mask] = head.gamma**steps * wave(steps * head.theta)
    return out.astype(np.float32)


def _parameters(spec: ToySpec) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(spec.seed if spec.seed is not None else 1000 + spec.version)
    L, H, C, N, Hh = spec.input_length, spec.horizon, len(spec.channels), spec.n_layers, spec.n_heads
    rem = np.stack([np.stack([rem_matrix(h, L) for h in spec.heads]) for _ in range(N)])  # [N, Hh, L, L]
    gates = np.array([[h.gate for h in spec.heads]] * N, np.float32).reshape(N, Hh, 1, 1)
    return {
        "W": rng.normal(0, 1 / np.sqrt(L), (L, H)).astype(np.float32),
        "bias": rng.normal(0, 1, (C, 1)).astype(np.float32),
        "scale": (0.5 + np.arange(N * Hh, dtype=np.float32).reshape(N, Hh, 1, 1) * 0.25).astype(np.float32),
        "rem": rem.astype(np.float32),
        "gate": gates,
        "one_minus_gate": (1.0 - gates).astype(np.float32),
    }


def cycle_table(spec: ToySpec) -> np.ndarray:
    """Q [P, C]: large and distinct per row, so a phase off by one changes every forecast visibly."""
    assert spec.cycle_period is not None
    rng = np.random.default_rng(5000 + spec.version)  # its own stream: W and bias stay as without a cycle
    return rng.normal(0, 10, (spec.cycle_period, len(spec.channels))).astype(np.float32)


def _forecast_nodes(source: str = "window", target: str = "forecast") -> list[onnx.NodeProto]:
    return [
        helper.make_node("Transpose", [source], ["x_t"], perm=[0, 2, 1]),  # [B, C, L]
        helper.make_node("MatMul", ["x_t", "W"], ["y_t"]),  # [B, C, H]
        helper.make_node("Add", ["y_t", "bias"], ["y_tb"]),
        helper.make_node("Transpose", ["y_tb"], [target], perm=[0, 2, 1]),  # [B, H, C]
    ]


def _cycle_rows(offsets: str, out: str) -> list[onnx.NodeProto]:
    """out [B, n, C] = Q[(phase[b] + offsets[k]) mod P]."""
    return [
        helper.make_node("Add", ["phase_col", offsets], [f"{out}_raw"]),  # [B, n]
        helper.make_node("Mod", [f"{out}_raw", "period"], [f"{out}_idx"]),
        helper.make_node("Gather", ["Q", f"{out}_idx"], [out], axis=0),  # [B, n, C]
    ]


def _cycle_nodes() -> tuple[list[onnx.NodeProto], list[onnx.NodeProto]]:
    """Nodes before the network (window − Q → `x_in`) and after it (`y` + Q → forecast)."""
    before = [
        helper.make_node("Unsqueeze", ["phase", "ax1"], ["phase_col"]),  # [B, 1]
        *_cycle_rows("in_offsets", "q_in"),
        helper.make_node("Sub", ["window", "q_in"], ["x_in"]),
    ]
    after = [*_cycle_rows("out_offsets", "q_out"), helper.make_node("Add", ["y", "q_out"], ["forecast"])]
    return before, after


def _cycle_initializers(spec: ToySpec) -> list[onnx.TensorProto]:
    assert spec.cycle_period is not None
    L, H = spec.input_length, spec.horizon
    arrays = {
        "Q": cycle_table(spec),
        "period": np.array(spec.cycle_period, np.int64),
        "in_offsets": np.arange(L, dtype=np.int64),
        "out_offsets": np.arange(L, L + H, dtype=np.int64),
        "ax1": np.array([1], np.int64),
    }
    return [numpy_helper.from_array(v, k) for k, v in arrays.items()]


def _network_nodes(spec: ToySpec) -> tuple[list[onnx.NodeProto], list[onnx.NodeProto], list[onnx.NodeProto]]:
    """(before, forecast, after): the forecast nodes, wrapped in the cycle's nodes when there is one."""
    if spec.cycle_period is None:
        return [], _forecast_nodes(), []
    before, after = _cycle_nodes()
    return before, _forecast_nodes("x_in", "y"), after


def _inspect_nodes() -> list[onnx.NodeProto]:
    return [
        helper.make_node("Unsqueeze", ["x_t", "ax3"], ["x_col"]),  # [B, C, L, 1]
        helper.make_node("Unsqueeze", ["x_t", "ax2"], ["x_row"]),  # [B, C, 1, L]
        helper.make_node("Mul", ["x_col", "x_row"], ["outer"]),  # [B, C, L, L]
        helper.make_node("Unsqueeze", ["outer", "ax23"], ["outer6"]),  # [B, C, 1, 1, L, L]
        helper.make_node("Mul", ["outer6", "scale"], ["scores"]),  # [B, C, N, Hh, L, L]
        helper.make_node("Softmax", ["scores"], ["attn_softmax"], axis=-1),
        helper.make_node("Identity", ["rem"], ["attn_rem"]),  # [N, Hh, L, L]
        helper.make_node("Mul", ["attn_softmax", "one_minus_gate"], ["soft_part"]),
        helper.make_node("Mul", ["rem", "gate"], ["rem_part"]),
        helper.make_node("Add", ["soft_part", "rem_part"], ["attn_mixed"]),
    ]


def _save(graph: onnx.GraphProto, path: Path) -> None:
    opsets = [helper.make_opsetid("", OPSET)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="rsa-fakes")
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def _value_info(name: str, shape: list[int | str]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _inputs(spec: ToySpec) -> list[onnx.ValueInfoProto]:
    window = _value_info("window", ["batch", spec.input_length, len(spec.channels)])
    if spec.cycle_period is None:
        return [window]
    return [window, helper.make_tensor_value_info("phase", TensorProto.INT64, ["batch"])]


def build_graphs(spec: ToySpec, folder: Path) -> None:
    L, H, C, N, Hh = spec.input_length, spec.horizon, len(spec.channels), spec.n_layers, spec.n_heads
    params = _parameters(spec)
    inputs = _inputs(spec)
    forecast = _value_info("forecast", ["batch", H, C])
    base_init = [numpy_helper.from_array(params[k], k) for k in ("W", "bias")]
    if spec.cycle_period is not None:
        base_init += _cycle_initializers(spec)
    before, network, after = _network_nodes(spec)
    _save(
        helper.make_graph(before + network + after, "toy_forecast", inputs, [forecast], base_init),
        folder / "model.onnx",
    )
    axes = {"ax2": [2], "ax3": [3], "ax23": [2, 3]}
    inspect_init = (
        base_init
        + [numpy_helper.from_array(params[k], k) for k in ("scale", "rem", "gate", "one_minus_gate")]
        + [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in axes.items()]
    )
    outputs = [
        forecast,
        _value_info("attn_softmax", ["batch", C, N, Hh, L, L]),
        _value_info("attn_rem", [N, Hh, L, L]),
        _value_info("attn_mixed", ["batch", C, N, Hh, L, L]),
    ]
    graph = helper.make_graph(
        before + network + after + _inspect_nodes(), "toy_inspect", inputs, outputs, inspect_init
    )
    _save(graph, folder / "inspect.onnx")


def _file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "bytes": path.stat().st_size}


def manifest_for(spec: ToySpec, folder: Path) -> dict[str, Any]:
    L, H, C, N, Hh = spec.input_length, spec.horizon, len(spec.channels), spec.n_layers, spec.n_heads
    heads = [
        {
            "head": i,
            "kind": h.kind,
            "dilation": h.dilation,
            "lambda": h.lam,
            "gamma": h.gamma,
            "theta": h.theta,
            "gate": h.gate,
        }
        for i, h in enumerate(spec.heads)
    ]
    manifest: dict[str, Any] = {
        "name": spec.name,
        "version": spec.version,
        "created": "2026-11-22T01:00:00+00:00",
        "kind": "rsa_transformer",
        "description": "A toy RSA layer over 8 steps of 3 channels.",
        "input_length": L,
        "horizon": H,
        "channels": list(spec.channels),
        "frequency": spec.frequency,
        "frequency_seconds": spec.frequency_seconds,
        "inputs": [{"name": "window", "dtype": "float32", "shape": ["batch", L, C]}],
        "outputs": [{"name": "forecast", "dtype": "float32", "shape": ["batch", H, C]}],
        "inspect_outputs": [
            {"name": "forecast", "dtype": "float32", "shape": ["batch", H, C]},
            {"name": "attn_softmax", "dtype": "float32", "shape": ["batch", C, N, Hh, L, L]},
            {"name": "attn_rem", "dtype": "float32", "shape": [N, Hh, L, L]},
            {"name": "attn_mixed", "dtype": "float32", "shape": ["batch", C, N, Hh, L, L]},
        ],
        "layers": [{"layer": n, "gate_mode": "layer", "heads": heads} for n in range(N)],
        "architecture": {"d_model": 8, "n_heads": Hh, "n_layers": N},
        "opset": OPSET,
        "verification": {
            "onnx": onnx.__version__,
            "provider": "CPUExecutionProvider",
            "batch_sizes": [1, 7],
            "max_abs_error": 0.0,
            "tolerance": 1e-4,
        },
        "files": {name: _file_entry(folder / name) for name in ("model.onnx", "inspect.onnx")},
        "metrics": {"test_mse": 0.5, "test_mae": 0.5},
        "dataset": {
            "name": "toy",
            "file": "toy.csv",
            "sha256": "0" * 64,
            "mode": "multivariate",
            "target": spec.channels[-1],
        },
    }
    if spec.cycle_period is not None:  # without one, no "cycle" key at all, as manifests before it
        manifest["inputs"].append({"name": "phase", "dtype": "int64", "shape": ["batch"]})
        manifest["cycle"] = {"period": spec.cycle_period, "step_seconds": spec.frequency_seconds}
    manifest.update(spec.manifest_overrides)
    return manifest


def intervals_block(levels: list[float], widths: Any) -> dict[str, Any]:
    """A version's `intervals` manifest block: split-conformal widths [levels, H, C] in the series' own
    units (no scale), calibrated on 100 validation windows."""
    return {
        "method": "split_conformal",
        "residuals": "absolute",
        "scale": "none",
        "levels": levels,
        "widths": np.asarray(widths, dtype=np.float64).tolist(),
        "calibration": {"split": "val", "windows": 100},
    }


def write_version(repository: Path, spec: ToySpec) -> Path:
    """<repository>/<name>/<version>/{model.onnx, inspect.onnx, manifest.json}; returns the folder."""
    folder = repository / spec.name / str(spec.version)
    folder.mkdir(parents=True, exist_ok=True)
    build_graphs(spec, folder)
    (folder / "manifest.json").write_text(json.dumps(manifest_for(spec, folder), indent=2))
    return folder


def write_repository(repository: Path, versions: tuple[int, ...] = (1, 2), name: str = "toy") -> Path:
    for version in versions:
        write_version(repository, ToySpec(name=name, version=version))
    return repository


# Models with a seasonal cycle (and one without, served beside them), for tests/app/**/test_cycle*.py.
CYCLE_SPECS = (
    ToySpec(name="hourly", cycle_period=24),  # phase = UTC hour of day
    ToySpec(name="daily", cycle_period=7, frequency="1D", frequency_seconds=86_400),  # days since epoch % 7
    ToySpec(name="weekly", cycle_period=168),  # UTC hour of the week (weeks from Thursday 1970-01-01)
    ToySpec(name="plain"),
)


def write_cycle_repository(repository: Path) -> Path:
    for spec in CYCLE_SPECS:
        write_version(repository, spec)
    return repository


class GatedSession:
    """Wraps a batcher's session calls: each call announces itself and blocks until the gate opens."""

    def __init__(self, batcher: DynamicBatcher) -> None:
        self.inner = batcher.runner.run
        self.gate = threading.Event()
        self.calls = 0
        replace_run(batcher, self)
        batcher.inline.max_rows = 0  # inline, a call would hold the event loop itself on the gate

    def __call__(self, feed: Feed) -> np.ndarray:
        self.calls += 1
        assert self.gate.wait(10), "gate never opened"
        return self.inner(feed)


class BlockedManifest:
    """A version whose manifest.json is a FIFO: reading it blocks (as a file on a hung network mount does)
    until `release()` writes the real manifest into it, closes it and puts the plain file back. Use it as
    a context manager: on exit a reader still blocked is released and the FIFO removed, so no test leaves
    a thread hanging."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "manifest.json"
        self.content = self.path.read_bytes()
        self.path.unlink()
        os.mkfifo(self.path)
        self.released = False

    def __enter__(self) -> BlockedManifest:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.released:
            self._write_if_read()
        self._restore()

    def _restore(self) -> None:
        """The manifest as a plain file again (a reader holding the FIFO keeps reading what it was given;
        one that comes later finds the file)."""
        if self.path.is_fifo():
            self.path.unlink()
            self.path.write_bytes(self.content)

    def release(self, timeout_s: float = 60.0) -> None:
        """Wait (a hang guard, not a verdict) for the reader, then give it the manifest and close."""
        deadline = time.monotonic() + timeout_s
        while not self._write_if_read():
            assert time.monotonic() < deadline, "nobody opened the blocked manifest"
            time.sleep(0.01)
        self._restore()

    def _write_if_read(self) -> bool:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return False
            raise
        try:
            os.set_blocking(fd, True)
            os.write(fd, self.content)
        finally:
            os.close(fd)
        self.released = True
        return True
