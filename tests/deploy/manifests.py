"""The Kubernetes manifests of deploy/kubernetes/ as `kubectl kustomize` renders them, and lookups in them.

Shared by the validation tests (test_kubernetes.py) and the fleet (test_fleet.py), which runs the
ScaledObject's own query against a real Prometheus.
"""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.conftest import need_tool

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_DIR = ROOT / "deploy" / "kubernetes"
OVERLAYS = tuple(sorted(p.name for p in (KUBERNETES_DIR / "overlays").iterdir() if p.is_dir()))
Doc = dict[str, Any]


@cache
def _render(folder: str, kubectl: str) -> str:
    result = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES_DIR / folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"kubectl kustomize {folder}:\n{result.stderr}"
    return result.stdout


def render(overlay: str, folder: str = "overlays") -> list[Doc]:
    """The objects of deploy/kubernetes/<folder>/<overlay> as `kubectl kustomize` renders them (no kubectl:
    skipped; under CI, failed)."""
    # Not from scripts/ci-tools.sh: Debian's kubernetes-client (1.20) predates kustomize components. The CI
    # machines have kubectl 1.32.
    kubectl = need_tool("kubectl", "see https://kubernetes.io/docs/tasks/tools/; it renders the overlays")
    text = _render(f"{folder}/{overlay}", kubectl)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def find(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    """The one object of `kind` (and `name`, when given)."""
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{len(found)} {kind} objects named {name}: {[d['metadata'] for d in found]}"
    return found[0]


def prometheus_trigger(scaled_object: Doc) -> dict[str, str]:
    """The metadata of the ScaledObject's one Prometheus trigger (serverAddress, query, threshold, ...)."""
    [trigger] = [t for t in scaled_object["spec"]["triggers"] if t["type"] == "prometheus"]
    return dict(trigger["metadata"])
