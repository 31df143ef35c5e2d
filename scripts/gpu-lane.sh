#!/usr/bin/env bash
# The GPU lane (docs/gpu.md): the tests in tests/gpu, then the benches on CUDA; writes results/gpu/*.txt and
# BENCHMARKS.md's GPU section. Needs a CUDA device and onnxruntime-gpu; elsewhere it says why and exits 2.
#   bash scripts/gpu-lane.sh [--quick] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
# A lent GPU machine has no .venv: its python3 with the bundle's wheels on PYTHONPATH (docs/gpu.md).
[ -x "$python" ] || python=python3
exec "$python" -m bench.gpu_lane "$@"
