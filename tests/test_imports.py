"""The import graph of our packages keeps its layers (docs/architecture.md): no cycle in `app/` or
`export/`, each layer imports only the layers below it, the service imports neither torch nor the training
code, and the engine API loads no runtime.

The graph is grimp's (the library under import-linter), built from the source without importing it;
imports under `if TYPE_CHECKING:` are left out, imports inside functions count.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("app", "export", "models", "bench", "batch")

# What each part of the service may import of ours (besides itself), lowest layer first. A module belongs
# to the longest prefix listed. Wiring (app.main, app.__main__, app.engine.__main__) may import anything
# of app.
MAY_IMPORT: dict[str, set[str]] = {
    "models": set(),
    "app.core": set(),
    "app.artifacts": {"app.core"},
    "app.engine": {"app.core", "app.artifacts"},
    "app.engine.__main__": {"app"},
    "app.inference": {"app.core", "app.artifacts", "app.engine"},
    "app.observability": {"app.core", "app.engine"},
    "app.runtime": {"app.core", "app.engine", "app.inference", "app.observability"},
    "app.protocols": {
        "app.core",
        "app.artifacts",
        "app.engine",
        "app.inference",
        "app.observability",
        "app.runtime",
    },
    "app.api": {
        "app.core",
        "app.artifacts",
        "app.engine",
        "app.inference",
        "app.observability",
        "app.protocols",
        "app.runtime",
    },
    "app.lifecycle": {
        "app.wiring",
        "app.core",
        "app.engine",
        "app.inference",
        "app.observability",
        "app.protocols",
        "app.runtime",
    },
    "app.supervisor": {"app.core", "app.observability"},
    "app.wiring": {"app.core", "app.engine", "app.observability"},
    "app.main": {"app"},
    "app.__main__": {"app"},
    "app.ui": set(),
    # The contract's names and the manifest, and the metrics the service's backtests share (numpy only):
    # nothing else of the service.
    "export": {"models", "app.artifacts", "app.inference.metrics"},
    # Batch scoring runs the service's own window, interval and session code, never its HTTP or protocols;
    # the distributed fit runs export's (docs/batch.md).
    "batch": {"app.core", "app.artifacts", "app.inference", "app.engine", "export", "models"},
}
# Imports that break the rules today, each with what removes it. The test fails when one is gone, so
# that the list only shrinks.
KNOWN: dict[tuple[str, str], str] = {}
# Cycles today, each with what breaks it; the test fails on any other, and when one of these is gone.
KNOWN_CYCLES: dict[frozenset[str], str] = {}
# Third-party packages the protocol-neutral layers must not import (HTTP belongs to protocols and api).
NO_WEB = {"fastapi", "starlette"}
NO_WEB_LAYERS = ("app.core", "app.artifacts", "app.engine", "app.inference")


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        *OURS, include_external_packages=True, exclude_type_checking_imports=True, cache_dir=None
    )


def _ours(module: str) -> bool:
    return module.split(".")[0] in OURS


def _edges() -> Iterable[tuple[str, str]]:
    g = graph()
    for importer in sorted(g.modules):
        if _ours(importer):
            for imported in sorted(g.find_modules_directly_imported_by(importer)):
                yield importer, imported


def _layer(module: str) -> str | None:
    """The longest prefix of MAY_IMPORT that `module` falls under (None: a package with no rule)."""
    best = None
    for layer in MAY_IMPORT:
        if (module == layer or module.startswith(layer + ".")) and (best is None or len(layer) > len(best)):
            best = layer
    return best


def _within(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def cycles(packages: tuple[str, ...]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module among `packages` (Tarjan's)."""
    g = graph()
    nodes = sorted(m for m in g.modules if m.split(".")[0] in packages)
    edges = {m: sorted(n for n in g.find_modules_directly_imported_by(m) if n in nodes) for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges[v]:
                found.append(frozenset(component))

    for v in nodes:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_in_app_or_export() -> None:
    found = cycles(("app", "export", "models"))
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert new == [], f"import cycles: {new}"
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert gone == [], f"these cycles are broken now: remove them from KNOWN_CYCLES: {gone}"


def test_each_layer_imports_only_the_layers_below_it() -> None:
    broken = set()
    for importer, imported in _edges():
        if not _ours(imported) or imported.split(".")[0] == "bench":
            continue
        layer = _layer(importer)
        if layer is None or importer.split(".")[0] == "bench":
            continue
        if _within(imported, [layer]) or _within(imported, MAY_IMPORT[layer]):
            continue
        broken.add((importer, imported))
    assert sorted(broken - KNOWN.keys()) == [], "imports across the layers (docs/architecture.md)"
    assert sorted(KNOWN.keys() - broken) == [], "these are fixed now: remove them from KNOWN"


def test_the_service_needs_no_training_code() -> None:
    """app/ runs from the serve requirements (no torch): it imports neither torch nor models/, export/,
    bench/, tests/, batch/ or the client."""
    bad = [
        (importer, imported)
        for importer, imported in _edges()
        if importer.split(".")[0] == "app"
        and imported.split(".")[0] in {"torch", "models", "export", "bench", "tests", "batch", "rsa_client"}
    ]
    assert bad == []


def test_the_protocol_neutral_layers_know_no_http() -> None:
    bad = [
        (importer, imported)
        for importer, imported in _edges()
        if _within(importer, NO_WEB_LAYERS) and imported.split(".")[0] in NO_WEB
    ]
    assert bad == []


@pytest.mark.parametrize("module", ["app.engine.api", "app.engine.types", "app.engine.client"])
def test_the_engine_boundary_loads_no_runtime(module: str) -> None:
    """A front end names the engine's types and talks to a remote engine without onnxruntime (or the
    batcher, or a web framework) in its process."""
    watched = ("onnxruntime", "app.engine.batching", "fastapi", "torch")
    code = f"import sys, {module}; print(sorted(m for m in {watched!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    loaded = out.stdout.strip()
    expected = "['app.engine.batching']" if module == "app.engine.client" else "[]"
    assert loaded == expected, f"import {module} loads {loaded}"
