#!/usr/bin/env bash
# Set up .venv (dev set) and the system tools of the deployment tests, then run the whole test suite:
# lint, then pytest with the type check (mypy) beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
# The system tools (apt) install beside the venv (pip): neither reads what the other writes.
scripts/ci-tools.sh &
tools=$!
scripts/setup.sh dev
wait "$tools"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# mypy (app/, models/, rsa_core/, export/, batch/ and client/, as [tool.mypy] in pyproject.toml says: one
# core for 28 s) runs beside pytest, which leaves a fifth of the two cores idle while its services start
# and wait (25 of 31.7 core-minutes used, a fresh clone on 2026-12-07); its verdict is printed after
# pytest's and fails the command as a test would.
types_log=$(mktemp)
.venv/bin/mypy >"$types_log" 2>&1 &
types=$!
trap 'kill "$types" 2>/dev/null || true; rm -f "$types_log"' EXIT
# pytest on two xdist workers where this process may run on two CPUs or more (tests/utils/parallel.py keeps
# each test file, and the files that start a local Ray, on one worker, heaviest first, and gives each
# worker's torch and BLAS threads its share of the CPUs); TEST_WORKERS=1: one process; TEST_WORKERS=N: N.
workers="${TEST_WORKERS:-$(($(nproc) >= 2 ? 2 : 1))}"
tests=0
.venv/bin/python -m pytest -n "$((workers > 1 ? workers : 0))" --dist loadfile "$@" || tests=$?
checked=0
wait "$types" || checked=$?
echo "mypy:"
cat "$types_log"
if [ "$tests" -ne 0 ]; then exit "$tests"; fi
exit "$checked"
