#!/usr/bin/env bash
# Create .venv at the repo root and install one requirements set into it.
#   scripts/setup.sh serve   # the service only: onnxruntime-gpu + web stack, no torch
#   scripts/setup.sh dev     # training, export and tests (adds torch==2.13.0 CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
set_name="${1:-dev}"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check \
    -r "requirements/${set_name}.txt" -c requirements/constraints.txt
# The CPU `onnxruntime` wheel would shadow onnxruntime-gpu: refuse to continue if anything pulled it in.
if .venv/bin/python -m pip list --disable-pip-version-check 2>/dev/null | grep -qiE '^onnxruntime '; then
    echo "error: plain 'onnxruntime' is installed next to onnxruntime-gpu; remove it" >&2
    exit 1
fi
