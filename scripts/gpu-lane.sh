#!/usr/bin/env bash
# The GPU lane (docs/gpu.md, bench/gpu_lane.py): one command, under 8 minutes on a 16-core GPU host, writing
# its tables and JSON into OUT. Needs a CUDA device and onnxruntime-gpu; elsewhere it says why and exits 2.
#   bash scripts/gpu-lane.sh OUT                 # the lane (< 8 min)
#   bash scripts/gpu-lane.sh OUT --slow          # the optional rest, a second command (< 10 min)
#   bash scripts/gpu-lane.sh OUT --update-page   # also rewrite BENCHMARKS.md's GPU section
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
# A lent GPU machine has no .venv: its python3 with the bundle's wheels on PYTHONPATH (docs/gpu.md).
[ -x "$python" ] || python=python3
exec "$python" -m bench.gpu_lane "$@"
