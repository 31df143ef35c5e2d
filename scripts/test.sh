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
.venv/bin/python -m pytest "$@"
