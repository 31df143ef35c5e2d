"""A bounded HTTP load generator against a real server on loopback, every answer checked.

    .venv/bin/python -m bench.loadgen                       # starts `python -m app` itself, 20,000 @ 64
    .venv/bin/python -m bench.loadgen --url http://127.0.0.1:8000 --requests 2000 --json

Without `--url` it starts the service (`sys.executable -m app` on a free 127.0.0.1 port), waits for
`/readyz`, runs the load and stops the service with SIGTERM (its exit code must be 0). Request bodies
are real 96-row windows of the model's data set (ETTh1 for the shipped model), built and serialised once
before anything is timed. Every answer is checked: status 200, the `/v1` answer shape, ids in order,
finite numbers, and numbers equal to onnxruntime run directly on the same windows. The run passes only
with every requested request sent, answered and checked, and zero errors (exit code 1 otherwise).

The parts live in bench.harness, reusable for comparing servers: `run_load` (bench.harness.load: URL,
request bodies, answer checker, count, concurrency, time limit) returns a `LoadResult`;
`prepare_forecast_workload` (bench.harness.workloads) builds the bodies and the checker for one model
version; `local_server` (bench.harness.servers) runs the service for the duration of a `with` block.
They are re-exported here, where the deploy and app tests import them from.

The client is raw asyncio streams speaking HTTP/1.1 keep-alive with request bytes built once, one
connection per worker coroutine, one event loop. Measured on the 2-core development machine, same bodies
and checks, 64 workers: against a canned-answer server the raw client did ~21,000-26,000 req/s at
0.04 ms of client CPU per request, `httpx.AsyncClient` (pool of 64 keep-alive connections) 286 req/s at
3.4 ms (874 req/s at 1.0 ms with 8); against the service, 253 req/s with the raw client and 65 req/s
with httpx, whose client took the cores the server needed. The table's client and server CPU per request
show on every run which side is the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence

from bench.harness.checks import ForecastChecker
from bench.harness.load import Failure, LoadResult, load_workload, run_load
from bench.harness.servers import free_port, local_server
from bench.harness.workloads import Workload, prepare_forecast_workload

__all__ = [
    "Failure",
    "ForecastChecker",
    "LoadResult",
    "Workload",
    "free_port",
    "local_server",
    "prepare_forecast_workload",
    "run_load",
]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.loadgen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running service (default: start `python -m app` on loopback)")
    ap.add_argument("--requests", type=int, default=20000, help="measured requests (default 20000)")
    ap.add_argument("--concurrency", type=int, default=64, help="worker coroutines, one connection each")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds; no request starts after")
    ap.add_argument("--request-timeout", type=float, default=30.0, help="seconds per request")
    ap.add_argument("--warmup", type=int, default=256, help="checked, untimed requests first")
    ap.add_argument("--model", default="etth1-rsa")
    ap.add_argument("--version", type=int, default=1)
    ap.add_argument("--series-per-request", type=int, default=1)
    ap.add_argument("--windows", type=int, default=64, help="distinct data windows in the bodies")
    ap.add_argument(
        "--server-env", action="append", default=[], metavar="RSA_X=V", help="for the started service"
    )
    ap.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")
    args = ap.parse_args(argv)
    if args.series_per_request < 1 or args.windows < 1:
        ap.error("--series-per-request and --windows must be >= 1")
    for item in args.server_env:
        if "=" not in item:
            ap.error(f"--server-env {item!r}: expected NAME=VALUE")
    return args


def format_result(result: LoadResult, checker: ForecastChecker | None = None) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(result.errors.items())) or "none"
    pct = "  ".join(f"p{q} {result.percentile_ms(q):.1f}" for q in (50, 90, 99))
    series_per_s = result.throughput * result.series_per_request
    client_ms = 1e3 * result.client_cpu_s / max(result.completed, 1)
    rows = [
        ("url", result.url),
        ("requests", f"{result.completed} of {result.requests} (+ {result.warmup} warm-up)"),
        ("concurrency", str(result.concurrency)),
        ("answers checked", str(result.checked)),
        ("errors", f"{result.error_count} ({kinds})"),
        ("duration", f"{result.duration_s:.2f} s"),
        ("throughput", f"{result.throughput:.0f} req/s, {series_per_s:.0f} series/s"),
        ("latency ms", f"{pct}  max {max(result.latencies_ms, default=math.nan):.1f}"),
        ("client CPU", f"{result.client_cpu_s:.1f} s ({client_ms:.2f} ms/req)"),
    ]
    if checker is not None:
        rows.insert(4, ("  parsed", f"{checker.parsed} (others byte-identical to a verified answer)"))
    if result.server_cpu_s is not None:
        ms = 1e3 * result.server_cpu_s / max(result.completed, 1)
        rows.append(("server CPU", f"{result.server_cpu_s:.1f} s ({ms:.2f} ms/req)"))
    if result.server_exit_code is not None:
        rows.append(("server exit code", str(result.server_exit_code)))
    if result.stopped_by_time_limit:
        rows.append(("time limit", f"reached after {result.time_limit_s:.0f} s: stopped sending"))
    rows.append(("result", "PASS" if result.passed else "FAIL"))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += [f"  {s}" for s in result.error_samples]
    return "\n".join(lines)


def execute(args: argparse.Namespace) -> tuple[LoadResult, ForecastChecker]:
    """Prepare the workload, start the service unless --url, run the load, stop the service."""
    work = prepare_forecast_workload(
        args.model, args.version, windows=args.windows, series_per_request=args.series_per_request
    )

    def load(base: str, pid: int | None) -> LoadResult:
        limits = {"time_limit_s": args.time_limit, "request_timeout_s": args.request_timeout}
        counts = {"requests": args.requests, "concurrency": args.concurrency, "warmup": args.warmup}
        return load_workload(base.rstrip("/"), work, **counts, **limits, server_pid=pid)

    if args.url:
        return load(args.url, None), work.checker
    env = dict(item.split("=", 1) for item in args.server_env)
    with local_server(env) as server:
        result = load(server.url, server.process.pid)
    result.server_exit_code = server.exit_code
    if server.exit_code != 0:
        result.error_samples.append(f"server exited with {server.exit_code}:\n{server.output()}")
    return result, work.checker


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result, checker = execute(args)
    if args.json:
        print(json.dumps(result.summary() | {"parsed_answers": checker.parsed}, indent=2))
    else:
        print(format_result(result, checker))
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
