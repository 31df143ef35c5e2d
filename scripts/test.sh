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
# Two workers (CI has two cores; TEST_WORKERS=0 runs one process): tests/utils/parallel.py keeps each test
# file, and the tests that start a local Ray, on one worker, and hands the heaviest out first.
.venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile "$@"
