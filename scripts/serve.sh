#!/usr/bin/env bash
# Set up .venv (serving set, no torch) and start the service on 127.0.0.1:8000 with the shipped model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh serve
exec .venv/bin/python -m app
