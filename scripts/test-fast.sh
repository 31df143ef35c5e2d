#!/usr/bin/env bash
# The fast tier, for every change: ruff, then every package's quick tests (pytest -m "not slow"; the slow
# ones are named in tests/tiers.py). Under 3 minutes on a 2-core machine. The whole suite, as CI runs it:
# scripts/test.sh. Sets up .venv (the dev set) only where it is missing; arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# (pytest-xdist: a .venv set up before the suite ran on two workers lacks it)
{ [ -x .venv/bin/pytest ] && .venv/bin/python -c "import xdist" 2>/dev/null; } || scripts/setup.sh dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Two xdist workers where there are two CPUs or more, TEST_WORKERS=1 one process, as scripts/test.sh.
workers="${TEST_WORKERS:-$(($(nproc) >= 2 ? 2 : 1))}"
.venv/bin/python -m pytest -m "not slow" -q -n "$((workers > 1 ? workers : 0))" --dist loadfile "$@"
