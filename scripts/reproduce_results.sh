#!/usr/bin/env bash
# Every training run behind docs/results.md, two at a time with one thread each (2-core machine),
# then the results page. About 40 min on the 2-core CI machine (27 runs). Runs that already have a
# report.json are skipped, so an interrupted reproduction resumes where it stopped.
#   bash scripts/reproduce_results.sh [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || scripts/setup.sh dev
jobs="${1:-2}"
runs() {
    # variant horizon seed data
    for h in 96 192 336 720; do
        for s in 0 1 2; do echo "rsa $h $s ETTh1"; echo "baseline $h $s ETTh1"; done
    done
    for h in 24 48 168; do echo "rsa $h 0 ETTh1"; done
    for h in 96 336; do echo "rsa $h 0 ETTh2"; echo "baseline $h 0 ETTh2"; done
}
one() {
    read -r variant horizon seed data <<<"$1"
    name="$(echo "$data" | tr 'A-Z' 'a-z')-$variant-h$horizon-s$seed"
    if [ -f "results/runs/$name/report.json" ]; then echo "skip $name"; return; fi
    .venv/bin/python -m export.train configs/etth1-rsa.yaml --data "data/ETT/$data.csv" \
        --variant "$variant" --horizon "$horizon" --seed "$seed" --set threads=1 --quiet
}
export -f one
runs | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {}
.venv/bin/python -m export.results
