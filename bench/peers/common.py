"""What every peer server shares: its command line, the model's manifest and its ONNX Runtime session.

The session is the one a competent user creates: ONNX Runtime's defaults (all graph optimisations,
the CPU memory arena on, sequential execution) with the intra-op pool sized to the CPUs this process
may use and one inter-op thread; with `--device cuda`, the CUDA provider first (TF32 off, as the service
runs it: the contract's CUDA_EXACT_OPTIONS) and the CPU provider for what it cannot run. No numpy,
orjson or web framework here: the LitServe peer imports this module in its own process too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import onnxruntime as ort

from app.artifacts.contract import CUDA_EXACT_OPTIONS

HOST = "127.0.0.1"  # loopback only: these servers exist to be benchmarked on this machine
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"


@dataclass(frozen=True)
class Model:
    """The manifest fields a peer needs to serve one model version."""

    directory: Path
    name: str
    version: int
    input_length: int
    horizon: int
    channels: list[str]

    @property
    def forecast_path(self) -> str:
        return f"/v1/models/{self.name}/versions/{self.version}/forecast"


def load_manifest(directory: Path) -> Model:
    manifest = json.loads((directory / "manifest.json").read_text())
    if manifest.get("cycle"):  # the peers send no phase input
        raise SystemExit(f"{directory}: a model with a seasonal cycle is not supported by the peers")
    return Model(
        directory=directory,
        name=manifest["name"],
        version=int(manifest["version"]),
        input_length=int(manifest["input_length"]),
        horizon=int(manifest["horizon"]),
        channels=list(manifest["channels"]),
    )


def create_session(model: Model, device: str) -> ort.InferenceSession:
    """`model.onnx` on the CPU, or on CUDA (then it is an error if CUDA is not what runs it)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = len(os.sched_getaffinity(0))
    so.inter_op_num_threads = 1
    providers: list[str | tuple[str, dict[str, str | int]]] = [CPU]
    if device == "cuda":
        if importlib.util.find_spec("nvidia") is not None:  # CUDA libraries from NVIDIA's wheels
            ort.preload_dlls(directory="")
        # TF32 off, as the service runs it: every server computes the numbers the checker expects
        providers = [(CUDA, {"device_id": 0, **CUDA_EXACT_OPTIONS}), CPU]
    session = ort.InferenceSession(str(model.directory / "model.onnx"), so, providers=providers)
    wanted = CUDA if device == "cuda" else CPU
    if session.get_providers()[0] != wanted:
        raise SystemExit(f"asked for {wanted}, got {session.get_providers()}")
    return session


def parse_args(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    ap.add_argument("--model-dir", type=Path, required=True, help="e.g. model_repository/etth1-rsa/1")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    return ap.parse_args(argv)
