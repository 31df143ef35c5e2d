#!/usr/bin/env bash
# Set up .venv (dev set) and the system tools of the deployment tests, then run the whole test suite:
# lint, type check, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
scripts/ci-tools.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # app/, models/, rsa_core/, export/, batch/ and client/, as [tool.mypy] in pyproject.toml says
# pytest on two xdist workers where this process may run on two CPUs or more (tests/utils/parallel.py keeps
# each test file, and the files that start a local Ray, on one worker, heaviest first, and gives each
# worker's torch and BLAS threads its share of the CPUs); TEST_WORKERS=1: one process; TEST_WORKERS=N: N.
workers="${TEST_WORKERS:-$(($(nproc) >= 2 ? 2 : 1))}"
.venv/bin/python -m pytest -n "$((workers > 1 ? workers : 0))" --dist loadfile "$@"
