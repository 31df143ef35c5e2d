"""The import graph of our packages keeps its layers (docs/architecture.md): no cycle in any of them,
each layer imports only the layers below it, the service imports neither torch nor the training code, the
engine API loads no runtime, and the page's picture of the packages is the graph's.

The graph is grimp's (the library under import-linter), built from the source without importing it. Every
import kind counts: at module level, inside functions, and under `if TYPE_CHECKING:` (a cycle hidden
behind one is still a cycle of the design; issue 44 found one that way).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
# `rsa_client` is client/rsa_client (pytest puts client/ on the path, pyproject.toml); `rsa_core` the rules
# every path shares (installed on its own, rsa_core/pyproject.toml).
OURS = ("app", "export", "models", "bench", "batch", "rsa_client", "rsa_core")

# What each part of the service may import of ours (besides itself), lowest layer first. A module belongs
# to the longest prefix listed. Wiring (app.main, app.__main__, app.engine.__main__) may import anything
# of app.
MAY_IMPORT: dict[str, set[str]] = {
    # The time and future-table rules every path shares (issue 44): below everything, nothing of ours.
    "rsa_core": set(),
    "models": set(),
    "app.core": set(),
    "app.artifacts": {"app.core", "rsa_core"},
    "app.engine": {"app.core", "app.artifacts"},
    "app.engine.__main__": {"app"},
    "app.inference": {"app.core", "app.artifacts", "app.engine", "rsa_core"},
    "app.observability": {"app.core", "app.engine"},
    "app.runtime": {"app.core", "app.engine", "app.inference", "app.observability"},
    "app.protocols": {
        "app.core",
        "app.artifacts",
        "app.engine",
        "app.inference",
        "app.observability",
        "app.runtime",
        "rsa_core",
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
    "export": {"models", "app.artifacts", "app.inference.metrics", "rsa_core"},
    # Batch scoring runs the service's own window, interval and session code, never its HTTP or protocols;
    # the distributed fit runs export's (docs/batch.md).
    "batch": {"app.core", "app.artifacts", "app.inference", "app.engine", "export", "models", "rsa_core"},
    # Installed on its own (client/pyproject.toml): nothing of ours but the shared rules.
    "rsa_client": {"rsa_core"},
}
# Imports that break the rules today, each with what removes it. The test fails when one is gone, so
# that the list only shrinks.
KNOWN: dict[tuple[str, str], str] = {}
# Cycles today, each with what breaks it; the test fails on any other, and when one of these is gone.
# None may stand in the shipped packages (SHIPPED, below); the one left is in bench/, which the test did
# not search before issue 44. (Issue 44's export.panel <-> global_onnx circle, hidden behind a
# `TYPE_CHECKING` import of GlobalModel from the command-line module, went when global_onnx named the
# model's own module instead; the family is export/global_models/ now, checked on its own below.)
KNOWN_CYCLES: dict[frozenset[str], str] = {
    frozenset(
        {"bench.harness.checks", "bench.harness.load", "bench.harness.measure", "bench.harness.workloads"}
    ): "issue 44: load imports measure's CPU reader, measure imports load's types and run_load (inside "
    "a function), checks imports load's Failure; the types they share belong in a module of their own",
}
# Third-party packages the protocol-neutral layers must not import (HTTP belongs to protocols and api).
NO_WEB = {"fastapi", "starlette"}
NO_WEB_LAYERS = ("app.core", "app.artifacts", "app.engine", "app.inference")


def build(*packages: str) -> grimp.ImportGraph:
    """The import graph of `packages`, every import kind counted (TYPE_CHECKING ones too)."""
    return grimp.build_graph(
        *packages, include_external_packages=True, exclude_type_checking_imports=False, cache_dir=None
    )


@cache
def graph() -> grimp.ImportGraph:
    return build(*OURS)


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


def cycles(packages: Iterable[str], g: grimp.ImportGraph | None = None) -> list[frozenset[str]]:
    """The strongly connected components of more than one module among `packages` (Tarjan's), in `g`
    (default: ours)."""
    g = graph() if g is None else g
    roots = set(packages)
    nodes = sorted(m for m in g.modules if m.split(".")[0] in roots)
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


def test_no_import_cycle_in_our_packages() -> None:
    found = cycles(OURS)
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert new == [], f"import cycles: {new}"
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert gone == [], f"these cycles are broken now: remove them from KNOWN_CYCLES: {gone}"


# What ships (the service, the exporter, the batch scorer, the client and the core they share): no cycle
# at all, none allowed for, every import kind counted.
SHIPPED = ("app", "export", "batch", "rsa_client", "rsa_core", "models")


def test_no_import_cycle_in_what_ships() -> None:
    assert [sorted(c) for c in cycles(SHIPPED)] == []
    assert [sorted(c) for c in KNOWN_CYCLES if any(_within(m, SHIPPED) for m in c)] == []


def test_a_cycle_through_type_checking_and_function_level_imports_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph counts the two import kinds that hid issue 44's cycle: `a` imports `b` only under
    `if TYPE_CHECKING:`, `b` imports `c` only inside a function, `c` imports `a` at module level."""
    package = tmp_path / "cycle_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from cycle_probe.b import f\n"
    )
    (package / "b.py").write_text("def f():\n    from cycle_probe import c\n\n    return c\n")
    (package / "c.py").write_text("import cycle_probe.a\n")
    (package / "d.py").write_text("import cycle_probe.a\n")  # imports into the cycle, not part of it
    monkeypatch.syspath_prepend(str(tmp_path))
    found = cycles(("cycle_probe",), build("cycle_probe"))
    assert found == [frozenset({"cycle_probe.a", "cycle_probe.b", "cycle_probe.c"})]


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


# What makes a module a command line: it parses arguments.
COMMAND_LINE = {"typer", "argparse", "click"}


def test_batch_imports_no_command_line_module() -> None:
    """batch/ runs export's fit, never one of its command lines (issue 44: batch/fit.py imported the private
    `_accumulate` of export.panel's): no module of batch imports a module of export that parses arguments."""
    g = graph()
    bad = [
        (importer, imported)
        for importer, imported in _edges()
        if importer.split(".")[0] == "batch"
        and imported.split(".")[0] == "export"
        and COMMAND_LINE & g.find_modules_directly_imported_by(imported)
    ]
    assert bad == []


GLOBAL_MODELS = "export.global_models"


def test_the_global_models_hold_no_cycle_and_their_package_imports_none_of_them() -> None:
    """export/global_models/ (issue 44 item 2: one package for the family that held the circle): no cycle
    among its modules, every import kind counted, and its `__init__` imports none of them, so that the
    batch fit importing `model` loads neither the command line nor torch."""
    g = graph()
    members = {m for m in g.modules if _within(m, [GLOBAL_MODELS]) and m != GLOBAL_MODELS}
    assert {f"{GLOBAL_MODELS}.model", f"{GLOBAL_MODELS}.cli", f"{GLOBAL_MODELS}.onnx"} <= members
    assert [sorted(c) for c in cycles(("export",)) if c & members] == []
    assert sorted(g.find_modules_directly_imported_by(GLOBAL_MODELS) & members) == []


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


def test_the_architecture_pages_picture_is_the_import_graph() -> None:
    """docs/architecture.md draws our packages and which imports which (`a --> b`, a mermaid graph):
    every arrow is an import the code has, and every import between two packages is drawn."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    picture = re.search(r"```mermaid\n(.*?)```", page, flags=re.S)
    assert picture is not None, "docs/architecture.md has no mermaid picture"
    arrow = re.compile(r"^\s*(\w+)(?:\[[^\]]*\])?\s*-->(?:\|[^|]*\|)?\s*(\w+)", flags=re.M)
    drawn = {(a, b) for a, b in arrow.findall(picture.group(1))}
    imported = {
        (importer.split(".")[0], imported.split(".")[0])
        for importer, imported in _edges()
        if _ours(imported) and importer.split(".")[0] != imported.split(".")[0]
    }
    assert sorted(imported - drawn) == [], "imports between packages the picture does not draw"
    assert sorted(drawn - imported) == [], "arrows of the picture that no import makes"
