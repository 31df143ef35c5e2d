#!/usr/bin/env bash
# Set up .venv (dev set) and run the whole test suite: lint, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest "$@"
