#!/usr/bin/env bash
# Every training run behind docs/results.md, two at a time with one thread each (2-core machine),
# then the results page: 36 long-window runs (results/long), 27 main L = 96 runs (results/runs) and
# 18 of round T (results/tuning); the long runs take 3-6 min each at one thread. Runs
# that already have a report.json are skipped, so an interrupted reproduction resumes where it stopped.
#   bash scripts/reproduce_results.sh [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || scripts/setup.sh dev
jobs="${1:-2}"
runs() {
    # round variant horizon seed data
    # The long-window RSA (rsa.md §7), the page's headline: a bank of linear RNNs read at the last step.
    for s in 0 1 2; do
        for v in rsa baseline; do
            for h in 96 192 336 720; do echo "long $v $h $s ETTh1"; done
            for h in 96 336; do echo "long $v $h $s ETTh2"; done
        done
    done
    for h in 96 192 336 720; do
        for s in 0 1 2; do echo "main rsa $h $s ETTh1"; echo "main baseline $h $s ETTh1"; done
    done
    for h in 24 48 168; do echo "main rsa $h 0 ETTh1"; done
    for h in 96 336; do echo "main rsa $h 0 ETTh2"; echo "main baseline $h 0 ETTh2"; done
    # Round T: the transformer alone (no linear path), what the REM adds (docs/results.md).
    for h in 96 192 336 720; do
        for s in 0 1; do echo "T rsa $h $s ETTh1"; echo "T baseline $h $s ETTh1"; done
    done
    echo "T rsa 96 2 ETTh1"; echo "T baseline 96 2 ETTh1"
}
one() {
    read -r round variant horizon seed data <<<"$1"
    if [ "$round" = main ] || [ "$round" = long ]; then
        config=configs/etth1-rsa.yaml out=results/runs
        [ "$round" = long ] && config=configs/etth1-rsa-long.yaml out=results/long
        name="$(echo "$data" | tr 'A-Z' 'a-z')-$variant-h$horizon-s$seed"
    else
        config=configs/etth1-transformer.yaml out=results/tuning
        name="$round-h$(printf %03d "$horizon")-${variant/baseline/base}-s$seed"
    fi
    if [ -f "$out/$name/report.json" ]; then echo "skip $name"; return; fi
    .venv/bin/python -m export.train "$config" --data "data/ETT/$data.csv" --variant "$variant" \
        --horizon "$horizon" --seed "$seed" --out "$out" --name "$name" --set threads=1 --quiet
}
export -f one
runs | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {}
.venv/bin/python -m export.results
