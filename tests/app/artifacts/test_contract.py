"""The contract's names have one copy, which the exporter shares without pulling in the service."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.artifacts import contract

ROOT = Path(__file__).resolve().parents[3]


def test_exporter_imports_only_the_contract_of_the_service() -> None:
    code = (
        "import sys, export.onnx; print(sorted(m for m in sys.modules if m == 'app' or m.startswith('app.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    # The contract, and the import-light pieces of it both sides run: the conformal quantile and the one
    # publishing path (app/artifacts/conformal.py, publish.py); nothing of the service's layers.
    shared = ["conformal", "contract", "publish"]
    assert out.stdout.strip() == str(["app", "app.artifacts", *(f"app.artifacts.{m}" for m in shared)])


def test_exporter_uses_the_contract_names() -> None:
    import export.onnx as exporter

    assert (exporter.INPUT_NAME, exporter.PHASE_NAME, exporter.OUTPUT_NAME) == (
        contract.FORECAST_INPUT,
        contract.PHASE_INPUT,
        contract.FORECAST_OUTPUT,
    )
    assert exporter.INSPECT_OUTPUTS is contract.INSPECT_OUTPUTS


def test_contract_names_are_the_documented_ones() -> None:
    doc = (ROOT / "docs" / "artifacts.md").read_text()
    for name in (
        contract.MODEL_FILE,
        contract.INSPECT_FILE,
        contract.MANIFEST_FILE,
        contract.FORECAST_INPUT,
        contract.PHASE_INPUT,
        *contract.INSPECT_OUTPUTS,
    ):
        assert f"`{name}`" in doc, name
