#!/usr/bin/env bash
# Set up .venv (serving set, no torch) and start the service on 127.0.0.1:8000 with the shipped model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh serve
# A version exported into the repository while the service runs is served without a restart: the service
# rescans the repository every RSA_POLL_S seconds (Triton's --model-control-mode=poll; docs/service.md).
# RSA_MODEL_REPOSITORY picks the repository: the shipped model_repository/ by default, your exports'
# my_models/ (the exporters' default) with `RSA_MODEL_REPOSITORY=my_models bash scripts/serve.sh`.
export RSA_MODEL_CONTROL="${RSA_MODEL_CONTROL:-poll}"
export RSA_POLL_S="${RSA_POLL_S:-5}"
exec .venv/bin/python -m app
