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
# TEST_WORKERS=2 runs pytest on two xdist workers (tests/utils/parallel.py keeps each test file, and the
# tests that start a local Ray, on one worker, heaviest first). One process by default: under xdist,
# tests/app/test_schemathesis.py's test_openapi_fuzz sends no case, and test_generated_case_count skips.
.venv/bin/python -m pytest -n "${TEST_WORKERS:-0}" --dist loadfile "$@"
