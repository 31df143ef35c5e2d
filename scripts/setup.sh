#!/usr/bin/env bash
# Create .venv at the repo root and install one requirements set into it.
#   scripts/setup.sh serve   # the service only: onnxruntime-gpu + web stack, no torch
#   scripts/setup.sh train   # the service + training and export: torch==2.13.0, the CPU build (no tests)
#   scripts/setup.sh user    # your own data end to end: train + the batch command (Ray) + the client (no tests)
#   scripts/setup.sh dev     # all of train + tests and linters (what scripts/test.sh runs)
set -euo pipefail
cd "$(dirname "$0")/.."
set_name="${1:-dev}"
# One line per step, so that a set-up of several minutes shows where it is (pip itself stays quiet).
step() { echo "setup ($set_name): $* ($(date +%H:%M:%S))"; }
# A new venv: pip compiles every file it installs on one core, compileall below does it on all of them
# (the dev set: 140 s -> 108 s on the 2-core machine, 2026-12-06). The .pyc files are wanted: where
# PYTHONDONTWRITEBYTECODE is set, nothing imported would ever be cached. An existing venv (serve.sh runs
# this on every start) is left to pip, which compiles only what it installs.
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
fresh=false
if [ ! -x .venv/bin/python ]; then
    fresh=true
    pip+=(--no-compile)
fi
step "creating .venv"
python3 -m venv .venv
if [ "$set_name" != serve ]; then
    # torch from PyTorch's CPU index first: on Linux x86_64, PyPI's torch wheel is the CUDA build, which
    # brings several GB of NVIDIA libraries that training and export here never use. Where that index
    # cannot be reached, the line below takes torch from the default index instead (on PyPI, that CUDA
    # build: it works, it is only bigger). RSA_TORCH_INDEX names another index (e.g. a mirror).
    torch_index="${RSA_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
    torch_pin=$(grep -oE '^torch==[^ ]+' requirements/train.txt)
    step "installing $torch_pin (the CPU build) from $torch_index"
    if ! "${pip[@]}" --no-deps --retries 0 --timeout 30 --index-url "$torch_index" "$torch_pin" 2>/dev/null; then
        echo "setup: $torch_index cannot be reached: $torch_pin comes from the default index" >&2
    fi
fi
step "installing requirements/${set_name}.txt"
"${pip[@]}" -r "requirements/${set_name}.txt" -c requirements/constraints.txt
if [ "$set_name" = dev ]; then  # statsforecast declares pandas<3 (requirements/bench-nodeps.txt)
    step "installing requirements/bench-nodeps.txt (without their dependencies)"
    "${pip[@]}" --no-deps -r requirements/bench-nodeps.txt
fi
if $fresh; then
    step "compiling the installed packages"
    # A file that does not compile (a package's Python 2 test data) is skipped, as pip skips it. The
    # packages' own test folders are never imported: left out, a quarter of the files (the dev set: 31 s
    # -> 19 s on the quiet 2-core machine, 2026-12-07).
    .venv/bin/python -m compileall -q -j 0 -x '/tests?/' .venv/lib >/dev/null 2>&1 || true
fi
# The CPU `onnxruntime` wheel would shadow onnxruntime-gpu: refuse to continue if anything pulled it in.
if .venv/bin/python -m pip list --disable-pip-version-check 2>/dev/null | grep -qiE '^onnxruntime '; then
    echo "error: plain 'onnxruntime' is installed next to onnxruntime-gpu; remove it" >&2
    exit 1
fi
step "done"
