#!/usr/bin/env bash
# Every run, sweep and evaluation behind docs/results.md, then the page (python -m export.results):
# - the shipped REM read-out (results/rem-readout): ETTh1 and ETTh2 at 96/192/336/720, 3 seeds, 24 runs
#   of configs/etth1-rem-readout.yaml (closed form, no training: 1-5 min each at one thread);
# - its trained predecessor, version 4's recipe (results/rem-readout-trained): the training-vs-step-0
#   ablation and the former no-REM baseline, 36 runs of 3-10 min;
# - the read-out sweeps (configs/sweeps/*.yaml -> results/sweeps, export.sweep), one after another;
# - the interval evaluations of the served versions 3-5 (results/intervals, export.conformal);
# - the first model, L = 96 (results/runs), and round T (results/tuning);
# - the M3 and Tourism competitions (results/competitions, bench.competitions).
# Runs with a report.json (and sweep rows already written) are skipped, so an interrupted reproduction
# resumes where it stopped.
#   bash scripts/reproduce_results.sh [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || scripts/setup.sh dev
jobs="${1:-2}"
runs() {
    # round variant horizon seed data
    for s in 0 1 2; do
        for d in ETTh1 ETTh2; do
            for h in 96 192 336 720; do echo "rem rsa $h $s $d"; done
        done
    done
    # version 4's recipe, trained on top of its least-squares start: training against step 0
    for s in 0 1 2; do
        for v in rsa baseline; do
            for h in 96 192 336 720; do echo "trained $v $h $s ETTh1"; done
            for h in 96 336; do echo "trained $v $h $s ETTh2"; done
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
    lower="$(echo "$data" | tr 'A-Z' 'a-z')"
    case "$round" in
        rem) config=configs/etth1-rem-readout.yaml out=results/rem-readout
             name="$lower-rem-readout-h$horizon-s$seed" ;;
        trained) config=configs/etth1-rem-readout-trained.yaml out=results/rem-readout-trained
                 name="$lower-$variant-h$horizon-s$seed" ;;
        main) config=configs/etth1-rsa.yaml out=results/runs name="$lower-$variant-h$horizon-s$seed" ;;
        *) config=configs/etth1-transformer.yaml out=results/tuning
           name="$round-h$(printf %03d "$horizon")-${variant/baseline/base}-s$seed" ;;
    esac
    if [ -f "$out/$name/report.json" ]; then echo "skip $name"; return; fi
    .venv/bin/python -m export.train "$config" --data "data/ETT/$data.csv" --variant "$variant" \
        --horizon "$horizon" --seed "$seed" --out "$out" --name "$name" --set threads=1 --quiet
}
export -f one
runs | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {}
for sweep in configs/sweeps/*.yaml; do .venv/bin/python -m export.sweep "$sweep"; done
for version in 3 4 5; do .venv/bin/python -m export.conformal "model_repository/etth1-rsa/$version"; done
# The competitions (bench/competitions.py): M3 and Tourism, monthly and quarterly, the global REM read-out
# beside statsforecast in one run each (about 5-15 min on 2 cores), into results/competitions/.
[ -f results/competitions/monthly.json ] || .venv/bin/python -m bench.competitions --unseen \
    --data M3:monthly --data Tourism:monthly --json results/competitions/monthly.json
[ -f results/competitions/quarterly.json ] || .venv/bin/python -m bench.competitions --unseen \
    --data M3:quarterly --data Tourism:quarterly --json results/competitions/quarterly.json
# Every M3 and Tourism frequency with our default model (the hybrid) and every statsforecast peer (about
# 40 min on an idle 2-core machine, AutoARIMA 31 of them), and the hybrid alone (2 min).
[ -f results/competitions/benchmark.json ] || .venv/bin/python -m bench.competitions --all \
    --json results/competitions/benchmark.json
[ -f results/competitions/hybrid.json ] || .venv/bin/python -m bench.competitions --all --no-stats \
    --json results/competitions/hybrid.json
# The M1 competition, held back from every choice of the model: the default trained on its histories beside
# statsforecast (minutes), and the shipped pretrained models on it zero-shot through the service (seconds).
[ -f results/competitions/m1.json ] || .venv/bin/python -m bench.competitions --m1 \
    --json results/competitions/m1.json
[ -f results/zero_shot/served_m1.json ] || .venv/bin/python -m bench.zero_shot_served --data M1:monthly \
    --data M1:quarterly --data M1:yearly --json results/zero_shot/served_m1.json
[ -f results/zero_shot/unseen_intervals_m1.json ] || .venv/bin/python -m bench.unseen_intervals --m1 \
    --json results/zero_shot/unseen_intervals_m1.json
# The pretrained monthly model's zero-shot evaluation (docs/pretrained.md: 43 min on the loaded 2-core
# machine) and one series' /v1/forecast latency against the named route's.
[ -f results/zero_shot/report.json ] || .venv/bin/python -m bench.zero_shot --json results/zero_shot/report.json
[ -f results/zero_shot/latency.json ] || .venv/bin/python -m bench.zero_shot_latency --requests 300 \
    --json results/zero_shot/latency.json
.venv/bin/python -m export.results
