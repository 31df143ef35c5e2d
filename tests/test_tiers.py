"""The fast tier (tests/tiers.py) names only tests that exist, keeps quick tests of every package, and is
what scripts/test-fast.sh runs; read from the source, without collecting the suite."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import tiers

ROOT = Path(__file__).resolve().parents[1]
# Each package's tests, and the fast tier must keep some of each (issue 44: a change to any package meets
# its quick tests on every run). bench's quick ones include smoke runs of its benchmarks.
PACKAGES = ("app", "export", "batch", "client", "bench", "models")


def _test_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    ]


def _fast(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    if any(rel == f or rel.startswith(f + "/") for f in tiers.SLOW_FILES):
        return []
    return [name for name in _test_functions(path) if name not in tiers.SLOW_TESTS.get(rel, {})]


@pytest.mark.parametrize("entry", sorted(tiers.SLOW_FILES))
def test_each_slow_file_exists(entry: str) -> None:
    assert (ROOT / entry).exists(), f"tests/tiers.py names {entry}, which is gone: remove it there"


@pytest.mark.parametrize("entry", sorted(tiers.SLOW_TESTS))
def test_each_slow_test_exists(entry: str) -> None:
    path = ROOT / entry
    assert path.is_file(), f"tests/tiers.py names {entry}, which is gone: remove it there"
    missing = sorted(set(tiers.SLOW_TESTS[entry]) - set(_test_functions(path)))
    assert missing == [], f"tests/tiers.py names tests that {entry} no longer has: {missing}"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_fast_tier_keeps_quick_tests_of_every_package(package: str) -> None:
    fast = [f"{p.name}::{t}" for p in sorted((ROOT / "tests" / package).rglob("test_*.py")) for t in _fast(p)]
    assert len(fast) >= 3, f"tests/{package}: the fast tier keeps {fast}"


def test_the_fast_command_runs_the_fast_tier() -> None:
    script = (ROOT / "scripts" / "test-fast.sh").read_text()
    assert '-m "not slow"' in script and "ruff check" in script
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/test-fast.sh" in readme
    for command in ("bash scripts/serve.sh", "bash scripts/test.sh"):  # the two commands, as they were
        assert f"```bash\n{command}\n```" in readme
