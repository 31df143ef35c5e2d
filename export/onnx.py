"""ONNX export: checkpoint -> <repository>/<name>/<version>/{model.onnx, inspect.onnx, manifest.json}.

    python -m export.onnx results/runs/etth1-rsa-h96-s0/checkpoint.safetensors --name etth1-rsa \
        --repository model_repository   # the shipped model's; without it: my_models/ (RSA_MODEL_REPOSITORY)

Every REM and gate is folded into constants for the model's input length (rsa.md §4); the data set's
scaler is inside the graph, so clients send raw values and get raw forecasts.  The command verifies
its own output (onnx.checker full check, no REM/gate arithmetic left in the graph, ONNX Runtime CPU
against PyTorch on batches 1, 7 and 64 of real and random windows) and writes the version folder
only when every check passed.  docs/artifacts.md is the contract the service reads.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import sys
import warnings
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
import typer
from torch import Tensor, nn

from app.artifacts.contract import (
    CUDA_EXACT_OPTIONS,
    FORECAST_INPUT,
    FORECAST_OUTPUT,
    INSPECT_FILE,
    INSPECT_OUTPUTS,
    MANIFEST_FILE,
    MODEL_FILE,
    PHASE_INPUT,
)
from export.checkpoint import load_checkpoint
from export.cli_options import ModelNameOption, RepositoryOption
from export.conformal import DEFAULT_LEVELS
from export.conformal import for_checkpoint as calibrate_intervals
from export.cycle import cycle_name
from export.data import PANEL_OPTIONS, READ_OPTIONS, ZONE_OPTIONS, StandardScaler
from export.evaluate import load_for_checkpoint
from export.publish import VersionExistsError, publish_version
from export.reports import TrainingReport, read_report
from models import ModelConfig, RSAForecaster

__all__ = [
    "FORBIDDEN_OPS",
    "INPUT_NAME",
    "INSPECT_OUTPUTS",
    "OUTPUT_NAME",
    "ExportError",
    "describe_model",
    "export_model",
    "forbidden_nodes",
]

log = logging.getLogger(__name__)

# Names the service reads (docs/artifacts.md).
# The contract's names, from its one copy (a leaf module: importing it pulls in nothing of the service).
INPUT_NAME = FORECAST_INPUT
PHASE_NAME = PHASE_INPUT  # int64 [batch], only for models with a seasonal cycle
OUTPUT_NAME = FORECAST_OUTPUT
OPSET = 18
# ONNX Runtime vs PyTorch, on the normalised scale: forecasts are compared in units of each channel's
# training standard deviation (the attention matrices are scale-free as they are). On the raw scale one
# float32 rounding step of a series near 13,000 is already 0.001, so an absolute bound failed good
# models of large-valued data while a real mismatch shows at any scale.
TOLERANCE = 1e-4
BATCH_SIZES = (1, 7, 64)
# Ops that would mean a REM or gate is still computed from η, ν, θ, μ in the graph.
FORBIDDEN_OPS = frozenset({"Pow", "Cos", "Sin", "Sigmoid", "Tanh"})


class ExportError(RuntimeError):
    """A check of the exported graphs failed; nothing was written to the repository."""


class ForecastGraph(nn.Module):
    """Raw window [B, L, C] -> raw forecast [B, H, C]: the data set's scaler around the folded model."""

    # Buffers registered by name (register_buffer), declared here for the type checker.
    mean: Tensor
    std: Tensor

    def __init__(self, model: RSAForecaster, mean: np.ndarray, std: np.ndarray):
        super().__init__()
        self.model = model
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32).view(1, 1, -1))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32).view(1, 1, -1))

    def forward(self, window: Tensor, phase: Tensor | None = None) -> Tensor:
        y = self.model((window - self.mean) / self.std, phase=phase)
        return y * self.std + self.mean


class InspectGraph(ForecastGraph):
    """The forecast plus, per channel, layer and head, the softmax, REM and mixed matrices."""

    def forward(  # type: ignore[override]
        self, window: Tensor, phase: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        y, maps = self.model((window - self.mean) / self.std, return_attn=True, phase=phase)
        return y * self.std + self.mean, maps["softmax"], maps["rem"], maps["mixed"]


def export_graph(
    module: nn.Module,
    example: tuple[Tensor, ...],
    input_names: Sequence[str],
    path: Path,
    outputs: Sequence[str],
) -> None:
    """`module` as an ONNX graph at `path` (every model family's exporter): inputs named `input_names`
    (one per tensor of `example`), each with one dynamic axis, the batch (its first)."""
    batch = torch.export.Dim("batch", min=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The dynamo exporter, explicitly: the TorchScript one is deprecated and loses output shapes.
        program = torch.onnx.export(
            module,
            example,
            dynamo=True,
            input_names=list(input_names),
            output_names=list(outputs),
            dynamic_shapes={name: {0: batch} for name in input_names},
            opset_version=OPSET,
            verbose=False,
        )
    assert program is not None  # dynamo=True returns the ONNXProgram
    program.save(str(path))


def _export(module: nn.Module, example: tuple[Tensor, ...], path: Path, output_names: list[str]) -> None:
    """A checkpoint's graph: the window, and the phase with a cycle."""
    export_graph(module, example, [INPUT_NAME, PHASE_NAME][: len(example)], path, output_names)


def forbidden_nodes(path: Path) -> list[str]:
    """Nodes (in the graph, its subgraphs and local functions) whose op computes a REM or a gate."""
    import onnx

    model = onnx.load(str(path))
    found: list[str] = []

    def walk(nodes: Iterable[onnx.NodeProto], where: str) -> None:
        for node in nodes:
            if node.op_type in FORBIDDEN_OPS:
                found.append(f"{where}/{node.name or node.op_type} ({node.op_type})")
            for attr in node.attribute:
                if attr.g is not None and attr.g.node:
                    walk(attr.g.node, f"{where}/{node.name}")
                for g in attr.graphs:
                    walk(g.node, f"{where}/{node.name}")

    walk(model.graph.node, "graph")
    for fn in model.functions:
        walk(fn.node, f"function:{fn.name}")
    return found


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


def cuda_provider() -> tuple[str, dict[str, Any]] | None:
    """The CUDA provider with the options the service runs it with (TF32 off: the contract's), where this
    machine can run it (a CUDA device for torch, and onnxruntime-gpu); else None."""
    import onnxruntime as ort

    if not torch.cuda.is_available() or CUDA not in ort.get_available_providers():
        return None
    return CUDA, {"device_id": 0, **CUDA_EXACT_OPTIONS}


def _session(path: Path, provider: str | tuple[str, dict[str, Any]] = CPU) -> Any:  # ort.InferenceSession
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    name = provider if isinstance(provider, str) else provider[0]
    session = ort.InferenceSession(str(path), opts, providers=[provider])
    if session.get_providers()[0] != name:
        raise ExportError(f"{path.name}: asked ONNX Runtime for {name}, it runs {session.get_providers()}")
    return session


Batch = tuple[np.ndarray, np.ndarray | None]  # raw windows [B, L, C], cycle phases [B] (int64) or None


def _verify(
    forecast_path: Path,
    inspect_path: Path,
    reference: InspectGraph,
    windows: dict[str, Batch],
    scale: np.ndarray,
    provider: str | tuple[str, dict[str, Any]] = CPU,
) -> dict[str, Any]:
    """ONNX Runtime (on `provider`) against PyTorch on every batch; raises ExportError past the tolerance.

    `scale`: each channel's training std; forecast differences are divided by it (TOLERANCE)."""
    fc, insp = _session(forecast_path, provider), _session(inspect_path, provider)
    on = provider if isinstance(provider, str) else provider[0]
    worst: dict[str, float] = {}  # on the scale compared: normalised for forecasts
    worst_raw: dict[str, float] = {}
    for label, (batch, phase) in windows.items():
        feeds = {INPUT_NAME: batch} if phase is None else {INPUT_NAME: batch, PHASE_NAME: phase}
        with torch.no_grad():
            outs = reference(torch.from_numpy(batch), None if phase is None else torch.from_numpy(phase))
            expected = dict(zip(INSPECT_OUTPUTS, (t.numpy() for t in outs), strict=True))
        got_fc = fc.run([OUTPUT_NAME], feeds)[0]
        got = dict(zip(INSPECT_OUTPUTS, insp.run(list(INSPECT_OUTPUTS), feeds), strict=True))
        checks = {f"{MODEL_FILE}:{OUTPUT_NAME}": (got_fc, expected[OUTPUT_NAME])}
        checks.update({f"{INSPECT_FILE}:{k}": (got[k], expected[k]) for k in INSPECT_OUTPUTS})
        for name, (a, b) in checks.items():
            if a.shape != b.shape:
                raise ExportError(f"{name} on {label}: shape {a.shape}, PyTorch gives {b.shape}")
            diff = np.abs(a.astype(np.float64) - b)
            raw = float(np.max(diff))
            forecast = name.endswith(f":{OUTPUT_NAME}")
            err = float(np.max(diff / scale)) if forecast else raw  # [B, H, C] / [C]
            worst[name] = max(worst.get(name, 0.0), err)
            worst_raw[name] = max(worst_raw.get(name, 0.0), raw)
            if not err <= TOLERANCE:
                unit = " in units of each channel's training std" if forecast else ""
                raise ExportError(
                    f"{name} on {label} ({on}): max |ONNX Runtime - PyTorch| = {err:.3g}{unit} > {TOLERANCE}"
                    + (f" (raw: {raw:.3g})" if forecast else "")
                )
    return {
        "max_abs_error": max(worst_raw.values()),
        "max_error": max(worst.values()),
        "per_output": worst,
        "scale": "forecasts in units of each channel's training standard deviation",
    }


def _check_windows(
    model: RSAForecaster, info: dict[str, Any], batch_sizes: Sequence[int] = BATCH_SIZES, seed: int = 0
) -> dict[str, Batch]:
    """Real test windows (raw scale, with their phases) and random ones, at every verification batch
    size."""
    cfg = model.cfg
    period = cfg.cycle_period
    scaler = StandardScaler.from_dict(info["data"]["scaler"])
    rng = np.random.default_rng(seed)
    out: dict[str, Batch] = {}
    try:
        split = load_for_checkpoint(info).test
    except Exception as e:  # the data set is optional for export; random windows still run
        log.warning("no real windows for verification (%s); random windows only", e)
        split = None
    for b in batch_sizes:
        if split is not None:
            starts = np.linspace(0, split.num_windows - 1, num=b).astype(np.int64)
            x, _ = split.windows(starts)
            phase = split.phases(starts, period).numpy() if period else None
            out[f"real windows, batch {b}"] = (scaler.inverse_transform(x.numpy()).astype(np.float32), phase)
        z = rng.standard_normal((b, cfg.input_length, cfg.channels))
        phase = rng.integers(0, period, size=b, dtype=np.int64) if period else None
        out[f"random windows, batch {b}"] = (scaler.inverse_transform(z).astype(np.float32), phase)
    return out


def _count(items: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return ", ".join(f"{n} {name}" for name, n in counts.items())


def describe_model(
    cfg: ModelConfig, gates: Sequence[float], dataset: str, step_seconds: float | None = 3600.0
) -> tuple[str, str]:
    """The manifest's `kind` and `description`: what the model is, from its config and its heads' gates
    (docs/artifacts.md). `rem_readout`: read at the last step, every head a REM head (`rsa_readout` with
    plain softmax heads beside them); `rsa_transformer`:
    an encoder whose heads mix softmax attention and REM through gates; `softmax_readout`/`transformer`:
    the same without REM heads."""
    types = cfg.head_types
    rem = [(kind, dilation) for kind, dilation in types if kind != "softmax"]
    names = [
        "dilated regular" if d > 1 and k == "regular" else ("dilated " + k if d > 1 else k) for k, d in rem
    ]
    rem_gates = sorted({round(g, 3) for (k, _), g in zip(types, gates, strict=True) if k != "softmax"})
    named = cycle_name(cfg.cycle_period, step_seconds)
    cycle = f"the {named} cycle (period {cfg.cycle_period}) removed, " if cfg.cycle_period else ""
    window = (
        f"the window with its {named} cycle (period {cfg.cycle_period}) removed"
        if cfg.cycle_period
        else "the window"
    )
    layers = f"{cfg.n_layers} encoder layer" + ("s" if cfg.n_layers > 1 else "")
    where = f"{dataset}, L = {cfg.input_length}, H = {cfg.horizon}, channel-independent"
    if cfg.head == "state":
        if not rem:
            return "softmax_readout", (
                f"Softmax read-out: one attention layer of {cfg.n_heads} softmax heads read at the last step "
                f"by a linear map per horizon step ({where})."
            )
        softmax_weight = ", ".join(f"{1 - g:.3g}" for g in rem_gates)
        plain = cfg.n_heads - len(rem)
        return "rem_readout" if not plain else "rsa_readout", (
            f"REM read-out (RSA's recurrence half): {len(rem)} fixed linear recurrences ({_count(names)}; "
            f"RSA's REM kernels) over {window}, RevIN-normalised, read at the last step by one "
            f"least-squares linear map per horizon step; gates {', '.join(f'{g:.3g}' for g in rem_gates)} "
            f"(softmax weight {softmax_weight})"
            + (f", beside {plain} plain softmax head" + ("s" if plain > 1 else "") if plain else "")
            + f". Not a transformer ({where})."
        )
    head = {"flatten": "a flattened head", "last": "a head on the last step"}[cfg.head]
    linear = ", beside a linear path L → H" if cfg.linear_residual else ""
    if not rem:
        return "transformer", (
            f"Transformer: {layers} of {cfg.n_heads} softmax heads, {head}{linear}; "
            f"{cycle.rstrip(', ')} ({where})."
        )
    plain = cfg.n_heads - len(rem)
    return "rsa_transformer", (
        f"RSA-Transformer: {layers} of {cfg.n_heads} heads, {len(rem)} mixing softmax "
        f"attention with a REM ({_count(names)}) through gates {', '.join(f'{g:.3g}' for g in rem_gates)}"
        + (f" and {plain} plain softmax" if plain else "")
        + f", {head}{linear}; {cycle}RevIN ({where})."
    )


def _io(path: Path) -> list[dict[str, Any]]:
    import onnx

    g = onnx.load(str(path)).graph
    return [
        {
            "name": o.name,
            "dtype": "float32",
            "shape": [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim],
        }
        for o in g.output
    ]


def intervals_with_bounds(block: dict[str, Any] | None, info: dict[str, Any]) -> dict[str, Any] | None:
    """The intervals block (docs/intervals.md; None without the data or with too few windows) with, per
    channel, whether the service clips its bounds at 0: the channels training found or was told are
    never negative (export/nonnegative.py)."""
    if block is None:
        return None
    names = set(info["data"].get("nonnegative") or [])
    return {**block, "nonnegative": [channel in names for channel in info["data"]["channels"]]}


def _inputs(cfg: ModelConfig, step_seconds: float) -> dict[str, Any]:
    """The manifest's `inputs` (the window, and the phase of a model with a cycle) and `cycle`."""
    return {
        "inputs": [
            {"name": INPUT_NAME, "dtype": "float32", "shape": ["batch", cfg.input_length, cfg.channels]}
        ]
        + ([{"name": PHASE_NAME, "dtype": "int64", "shape": ["batch"]}] if cfg.cycle_period else []),
        # phase = floor(unix seconds of the window's first row / step_seconds) mod period
        "cycle": {"period": cfg.cycle_period, "step_seconds": step_seconds} if cfg.cycle_period else None,
    }


def _metrics(report_path: Path) -> dict[str, Any] | None:
    """The manifest's `metrics`: the training run's test MSE and MAE (None without its report)."""
    if not report_path.exists():
        return None
    rep = read_report(report_path, TrainingReport)
    return {"test_mse": rep.test.mse, "test_mae": rep.test.mae, "run": rep.name}


def _dataset_record(data: dict[str, Any]) -> dict[str, Any]:
    """The manifest's `dataset` block from a checkpoint's data record: what it was trained on and how the
    file was read, so that its intervals can be calibrated again."""
    return {
        "name": data["name"],
        "file": Path(data["path"]).name,
        "sha256": data["sha256"],
        "mode": data["mode"],
        "target": data["target"],
        "protocol": data["protocol"],
        "nonnegative": data.get("nonnegative", []),
        "nonnegative_rule": data.get("nonnegative_rule"),
        **{
            k: data[k] for k in ("path", *READ_OPTIONS, *PANEL_OPTIONS, *ZONE_OPTIONS) if k in data
        },  # to calibrate again
    }


def _checked(fc_path: Path, insp_path: Path, reference: Any, windows: Any, std: np.ndarray) -> dict[str, Any]:
    """Both graphs checked (ONNX's full check, no REM or gate value computed), then verified against
    PyTorch on the CPU provider, and on CUDA where a GPU is at hand: a graph whose GPU numbers are not the
    verified ones is not published."""
    import onnx

    for p in (fc_path, insp_path):
        onnx.checker.check_model(str(p), full_check=True)
        bad = forbidden_nodes(p)
        if bad:
            raise ExportError(f"{p.name} still computes REM/gate values: {bad[:5]}")
    verification = _verify(fc_path, insp_path, reference, windows, std)
    cuda = cuda_provider()
    if cuda is not None:
        verification["cuda"] = {
            "provider": CUDA,
            "options": dict(CUDA_EXACT_OPTIONS),
            **_verify(fc_path, insp_path, reference, windows, std, cuda),
        }
    return verification


def export_model(
    checkpoint: str | Path,
    repository: str | Path,
    name: str,
    version: int | None = None,
    report: str | Path | None = None,
    *,
    verify_batch_sizes: Sequence[int] = BATCH_SIZES,
    levels: Sequence[float] = DEFAULT_LEVELS,
) -> Path:
    """Export, verify and publish one model version; returns the version folder.

    `verify_batch_sizes`: the batches ONNX Runtime is checked against PyTorch on. The inspection graph
    holds batch x C x heads x L x L floats per matrix (3.7 GB at batch 64 and L = 720), so long inputs
    need smaller ones. `levels`: the prediction intervals to calibrate (percent; those the validation
    windows allow, docs/intervals.md)."""
    import onnx
    import onnxruntime as ort

    checkpoint = Path(checkpoint)
    model, info = load_checkpoint(checkpoint)
    metrics = _metrics(Path(report) if report else checkpoint.with_name("report.json"))

    cfg = model.cfg
    scaler = info["data"]["scaler"]
    if not verify_batch_sizes or min(verify_batch_sizes) < 1:
        raise ExportError(f"verify_batch_sizes must be positive batch sizes, got {list(verify_batch_sizes)}")
    if version is not None and version < 1:
        raise ExportError(
            f"version must be a positive integer (the service serves only those), got {version}"
        )
    # Reference: the model as trained (REM computed from its parameters). Exported: a folded copy.
    mean, std = np.array(scaler["mean"]), np.array(scaler["std"])
    reference = InspectGraph(model, mean, std).eval()
    folded = copy.deepcopy(model).fold()
    example: tuple[Tensor, ...] = (torch.zeros(2, cfg.input_length, cfg.channels),)
    if cfg.cycle_period:
        example += (torch.tensor([0, cfg.cycle_period - 1], dtype=torch.int64),)

    model_dir = Path(repository) / name

    def write(staging: Path, version: int) -> None:
        fc_path, insp_path = staging / MODEL_FILE, staging / INSPECT_FILE
        _export(ForecastGraph(folded, mean, std).eval(), example, fc_path, [OUTPUT_NAME])
        _export(InspectGraph(folded, mean, std).eval(), example, insp_path, list(INSPECT_OUTPUTS))
        windows = _check_windows(model, info, verify_batch_sizes)
        verification = _checked(fc_path, insp_path, reference, windows, std)

        layers = model.recurrence_report()
        kind, description = describe_model(
            cfg,
            [h["gate"] for h in layers[0]["heads"]],
            info["data"]["name"],
            info["data"]["frequency_seconds"],
        )
        manifest = {
            "name": name,
            "version": version,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "kind": kind,
            "description": description,
            "input_length": cfg.input_length,
            "horizon": cfg.horizon,
            "channels": info["data"]["channels"],
            "frequency": info["data"]["frequency"],
            "frequency_seconds": info["data"]["frequency_seconds"],
            **_inputs(cfg, info["data"]["frequency_seconds"]),
            "outputs": _io(fc_path),
            "inspect_outputs": _io(insp_path),
            "layers": layers,
            "architecture": cfg.to_dict(),
            "opset": OPSET,
            "verification": {
                "onnx": onnx.__version__,
                "onnxruntime": ort.__version__,
                "torch": torch.__version__,
                "provider": CPU,
                "batch_sizes": list(verify_batch_sizes),
                "tolerance": TOLERANCE,
                **verification,
            },
            "files": {
                p.name: {"sha256": _sha256(p), "bytes": p.stat().st_size} for p in (fc_path, insp_path)
            },
            "metrics": metrics,
            "intervals": intervals_with_bounds(calibrate_intervals(fc_path, info, levels), info),
            # local times (`--timezone`): the zone naive served starts are read in and answers shown in
            **({"timezone": info["data"]["timezone"]} if info["data"].get("timezone") else {}),
            "dataset": _dataset_record(info["data"]),
            "source_checkpoint": {"file": checkpoint.name, "sha256": _sha256(checkpoint)},
        }
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")

    try:  # one publishing path (export/publish.py): the service's folder rule, staged, renamed
        return publish_version(model_dir, write, version)
    except VersionExistsError as e:
        raise ExportError(str(e)) from None


def main(
    checkpoint: Annotated[Path, typer.Argument(help="checkpoint.safetensors written by export.train")],
    name: ModelNameOption,
    repository: RepositoryOption = Path("my_models"),
    version: Annotated[int | None, typer.Option(help="version number (default: next free)")] = None,
    report: Annotated[
        Path | None, typer.Option(help="training report (default: beside the checkpoint)")
    ] = None,
    level: Annotated[
        list[float] | None,
        typer.Option(
            help="a prediction-interval level to calibrate, in percent (repeatable; default 50 80 90 95 99)"
        ),
    ] = None,
) -> None:
    """Export a checkpoint to ONNX with precomputed REM kernels, verify it and publish it."""
    logging.getLogger("torch").setLevel(logging.ERROR)  # the exporter's notes on absent torchvision ops
    # What calibration did (levels, windows) or why it did not: one plain line each.
    said = logging.StreamHandler(sys.stdout)
    said.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger("export.conformal").addHandler(said)
    logging.getLogger("export.conformal").setLevel(logging.INFO)
    levels = sorted(level) if level else list(DEFAULT_LEVELS)
    if not all(0 < v < 100 for v in levels) or len(set(levels)) != len(levels):
        typer.echo("error: --level takes distinct percentages strictly between 0 and 100", err=True)
        raise typer.Exit(2)
    try:
        final = export_model(checkpoint, repository, name, version, report, levels=levels)
    except ExportError as e:
        typer.echo(f"export failed, nothing written: {e}", err=True)
        raise typer.Exit(1) from None
    m = json.loads((final / MANIFEST_FILE).read_text())
    typer.echo(
        f"{final}: verified on batches {m['verification']['batch_sizes']}, "
        f"max |ORT - PyTorch| = {m['verification']['max_error']:.2e} (normalised), "
        f"{m['verification']['max_abs_error']:.2e} (raw)"
    )


if __name__ == "__main__":
    typer.run(main)
