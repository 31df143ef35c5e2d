"""The exporter on a GPU host records the CUDA parity (TF32 off) beside the CPU one, within its bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

for module in ("safetensors", "onnxscript", "pandas", "typer"):  # requirements/train.txt, beyond torch
    pytest.importorskip(module, reason=f"the exporter needs {module} (requirements/train.txt)")

from export.onnx import TOLERANCE, cuda_provider, export_model  # noqa: E402
from tests.export.test_onnx import checkpoint  # noqa: E402, F401  (the tiny model's module-scoped fixture)


def test_the_manifest_records_cuda_parity(checkpoint: Path, tmp_path: Path) -> None:  # noqa: F811
    assert cuda_provider() is not None, "torch sees no CUDA device here (a CPU build of torch?)"
    version_dir = export_model(checkpoint, tmp_path / "repo", "tiny")
    verification = json.loads((version_dir / "manifest.json").read_text())["verification"]
    cuda = verification["cuda"]
    assert cuda["provider"] == "CUDAExecutionProvider" and cuda["options"] == {"use_tf32": "0"}
    assert cuda["max_error"] <= TOLERANCE
    print(f"\nCPU max error {verification['max_error']:.2e}, CUDA max error {cuda['max_error']:.2e}")
