"""The service measured side by side with raw ONNX Runtime and peer servers, in one run, on loopback.

    .venv/bin/python -m bench.serving                                   # the full run (a few minutes)
    .venv/bin/python -m bench.serving --requests 3000 --json serving.json
    .venv/bin/python -m bench.serving --smoke                           # tiny counts: the test suite's
    .venv/bin/python -m bench.serving --servers minimal,service --concurrency 1
    .venv/bin/python -m bench.serving --covariates    # a future covariate's cost: bench/serving_covariates.py

What runs, one after another on this machine, all with version 1 of the shipped model
(model_repository/etth1-rsa/1, no seasonal cycle) and the same request bodies (bench.harness.workloads'
`prepare_forecast_workload`: real ETTh1 windows of 96x7, built and serialised once):

1. raw ONNX Runtime in this process, batch 1 and batch `--big-series` (256), on the bodies' windows;
2. each server in turn, started on a free 127.0.0.1 port, polled on GET /readyz, measured, stopped:
   - `minimal`  bench/peers/minimal.py: Starlette + orjson + one session call per request;
   - `floor`    bench/peers/floor.py: the JSON parsed and a fixed answer, no model (HTTP + JSON floor);
   - `naive`    bench/peers/naive_fastapi.py: a tutorial's FastAPI server (`dict`, `tolist()`);
   - `litserve` bench/peers/litserve_server.py: LitServe, batching 64 requests / 2 ms;
   - `service`  `python -m app` with RSA_MODELS=etth1-rsa (both versions load; requests go to
     /v1/models/etth1-rsa/versions/1/forecast), RSA_DEVICE from --device, RSA_DRAIN_DELAY_S=0 (the
     harness's: it only shortens the stop), every other setting its default.
   Each server gets one-series requests at every `--concurrency` (default 1,16,64), `--requests` per
   cell after `--warmup` untimed ones, then (minimal, LitServe, the service) `--big-requests` requests
   of `--big-series` series at `--big-concurrency` after one warm-up request per connection. The
   service then gets the same big requests again, same counts and warm-up, in the same process: the
   same windows through OIP v2 REST infer (POST /v2/models/etth1-rsa/versions/1/infer) with Triton's
   binary tensor data extension (`window` FP32 [series, 96, 7] as raw bytes after a JSON header whose
   length the Inference-Header-Content-Length header gives; `forecast` asked in binary), bodies built
   once like the JSON ones: the server neither parses the request's 3 MB of JSON numbers nor writes
   the answer's.

3. with `--rounds N` (default 3), N − 1 more rounds of the minimal server and the service alone,
   one-window cells only, each started afresh, which of the two goes first alternating. This machine
   runs a process at one of two speeds and switches between them, even within a run (BENCHMARKS.md
   §1): one round's ratio may compare a slowed server with a fast one. The targets against the minimal
   server are the median over the rounds of each round's ratio, every round's value shown beside it.

How: bench.harness.load's `run_load`, the raw asyncio HTTP/1.1 keep-alive client, one connection per
concurrent worker, in this process (the servers get the rest of the machine: nothing else of the
benchmark runs while a cell is measured). Every answer is checked against onnxruntime's forecast of
the same window by bench.harness.checks' `ForecastChecker` (OIP v2 binary answers by `OipBinaryChecker`: the
JSON header's output and binary_data_size, then the raw float32 forecast, same tolerances), except the
floor's: its fixed answer is only checked to be the same JSON answer every time. Server CPU is the
whole process tree's (LitServe runs several processes) over the measured phase, per request; client
CPU is this process's.

LitServe lives apart from .venv, in .venv/litserve, put on PYTHONPATH for its process only: litserve
requires uvicorn[standard], whose uvloop would otherwise become uvicorn's loop for `python -m app`
and every peer (the serving image runs asyncio). Nothing is installed at bench time: without it, the
LitServe row says "skipped" with the command that installs it, pinned, without deps:

    .venv/bin/python -m pip install --no-deps --target .venv/litserve -r bench/peers/requirements-litserve.txt

LitServe makes no network calls; `generate_client_file=False` keeps it from writing client.py.

Reading it: stdout is Markdown, to paste into BENCHMARKS.md. Table 1 is req/s with p50/p99 latency
per concurrency (raw ORT: windows/s and latency of the session call alone); table 2 is windows/s for
256-series requests against raw ORT at batch 256 (the service twice: /v1 JSON, OIP v2 binary); then
server (client) CPU ms per request, which says whose CPU was the limit on a 2-core machine, and the
issue's targets, met or missed (not asserted). A cell with errors or cut by `--seconds` says so; the
exit code is 1 if any server failed to start, an answer was wrong, or a server did not stop cleanly
(a skipped server is none of these).
The load average before and after is printed: the machine may be shared, and a busy neighbour lowers
every number of the run it overlaps.

On a GPU host: `--device cuda` runs raw ORT and the peers with the CUDA provider first (a peer refuses
to start if CUDA is not what runs its session) and the service with RSA_DEVICE=cuda.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.harness.report import write_json
from bench.harness.workloads import oip_binary_workload, prepare_forecast_workload, windows_of
from bench.serving_report import Report, format_report, report_json
from bench.serving_servers import MODEL_DIR, SERVERS, ServerRun, raw_ort, run_server


def execute(args: argparse.Namespace) -> Report:
    t0 = time.perf_counter()
    load_before = os.getloadavg()
    servers = [s for s in SERVERS if s.key in args.servers]
    print("[serving] preparing the request bodies and reference forecasts", file=sys.stderr)
    small = prepare_forecast_workload(windows=args.windows)
    big = prepare_forecast_workload(windows=args.big_windows, series_per_request=args.big_series)
    big_v2 = oip_binary_workload(big)
    print("[serving] raw ONNX Runtime in this process", file=sys.stderr)
    raw_small = raw_ort(windows_of(small), args.requests, args.seconds, args.device)
    raw_big = raw_ort(windows_of(big), args.big_requests, args.seconds, args.device)
    runs = [run_server(s, small, big, big_v2, args) for s in servers]
    rounds: list[tuple[ServerRun, ServerRun]] = []
    pair = [s for s in servers if s.key in ("minimal", "service")]
    for k in range(1, args.rounds if len(pair) == 2 else 1):
        order = pair if k % 2 == 0 else pair[::-1]  # alternate which of the two goes first
        done = {s.key: run_server(s, small, big, big_v2, args, small_only=True) for s in order}
        rounds.append((done["minimal"], done["service"]))
    config = {k: v for k, v in vars(args).items() if k != "json"} | {"model_dir": str(MODEL_DIR)}
    elapsed = time.perf_counter() - t0
    return Report(config, raw_small, raw_big, runs, load_before, os.getloadavg(), elapsed, rounds)


# --------------------------------------------------------------------------------------------------
# The command line.

SMOKE = {
    "concurrency": [1, 4],
    "requests": 20,
    "warmup": 4,
    "seconds": 20.0,
    "windows": 8,
    "big_series": 256,
    "big_windows": 2,
    "big_requests": 2,
    "big_concurrency": 2,
    "rounds": 2,
}


def _int_list(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers, comma-separated")
    return values


def _server_list(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = sorted(set(keys) - {s.key for s in SERVERS})
    if unknown or not keys:
        raise argparse.ArgumentTypeError(f"unknown server(s) {unknown}; known: {[s.key for s in SERVERS]}")
    return keys


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.serving", description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=_int_list, help="e.g. 1,16,64 (default; with --covariates: 1,16)")
    ap.add_argument("--requests", type=int, default=2000, help="measured one-series requests per cell")
    ap.add_argument("--warmup", type=int, default=200, help="untimed, checked requests before each cell")
    ap.add_argument("--seconds", type=float, default=30.0, help="cap per cell (and its warm-up, apart)")
    ap.add_argument("--windows", type=int, default=64, help="distinct windows in the one-series bodies")
    ap.add_argument("--big-series", type=int, default=256, help="series per request in table 2")
    ap.add_argument("--big-windows", type=int, default=16, help="bodies of --big-series (each ~3 MB)")
    ap.add_argument("--big-requests", type=int, default=16, help="measured requests in table 2")
    ap.add_argument("--big-concurrency", type=int, default=4)
    ap.add_argument(
        "--servers", type=_server_list, default=[s.key for s in SERVERS], help="subset, e.g. service"
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of the minimal server and the service (one-window cells; the targets against the "
        "minimal server are their median)",
    )
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--json", type=Path, metavar="PATH", help="write the raw results there")
    ap.add_argument("--smoke", action="store_true", help="tiny counts (" + ", ".join(SMOKE) + ")")
    ap.add_argument(
        "--covariates",
        action="store_true",
        help="instead: the promo panel's global read-outs with and without a future covariate, one "
        "service, --rounds rounds (bench/serving_covariates.py)",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    if args.concurrency is None:
        args.concurrency = [1, 16] if args.covariates else [1, 16, 64]
    counts = (args.requests, args.warmup, args.windows, args.big_series, args.big_windows, args.big_requests)
    if min(counts) < 1 or args.big_concurrency < 1 or args.rounds < 1 or args.seconds <= 0:
        ap.error("every count must be >= 1, and --seconds > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.covariates:
        from bench import serving_covariates  # the issue 36 mode: trains its models with export/

        return serving_covariates.main(args)
    report = execute(args)
    print(format_report(report))
    if args.json:
        write_json(args.json, report_json(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
