"""/healthz latency while the service is saturated with large forecast requests.

    .venv/bin/python -m bench.saturation                       # 256 series per request, 4 clients, 20 s
    .venv/bin/python -m bench.saturation --series-per-request 16 --seconds 10

Starts the service (`python -m app`, one intra-op thread), loads it with bench.harness's load generator (every
answer checked) and, from a separate process so that the load client's own work never delays it, probes
GET /healthz every 20 ms on one keep-alive connection. Prints the load's throughput and the probe's
p50/p99/max. Health checks wait only for the event loop; what holds the loop is each request's Python
work (validation, building the answer), while session calls run in their own threads.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import time
from collections.abc import Sequence

import numpy as np

from bench.harness.load import load_workload
from bench.harness.servers import local_server
from bench.harness.workloads import prepare_forecast_workload

PROBE_INTERVAL_S = 0.02


def probe(port: int, seconds: float) -> list[float]:
    """GET /healthz every 20 ms for `seconds`: the latencies in ms (run in its own process)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    latencies: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"/healthz answered {response.status}")
        latencies.append((time.perf_counter() - t0) * 1e3)
        time.sleep(PROBE_INTERVAL_S)
    conn.close()
    return latencies


def measure(series_per_request: int, concurrency: int, seconds: float) -> dict[str, float]:
    work = prepare_forecast_workload(model="etth1-rsa", version=1, series_per_request=series_per_request)
    with local_server(env={"RSA_INTRA_OP_THREADS": "1"}) as server:
        port = server.url.rsplit(":", 1)[1]
        prober = subprocess.Popen(
            [sys.executable, "-m", "bench.saturation", "--probe", port, "--seconds", str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        unbounded = 10**9  # requests: the time limit bounds them
        result = load_workload(
            server.url, work, requests=unbounded, concurrency=concurrency, time_limit_s=seconds
        )
        latencies = json.loads(prober.communicate(timeout=seconds + 60)[0])
    return {
        "requests": result.completed,
        "errors": result.error_count,
        "series_per_s": result.throughput * series_per_request,
        "healthz_p50_ms": float(np.percentile(latencies, 50)),
        "healthz_p99_ms": float(np.percentile(latencies, 99)),
        "healthz_max_ms": max(latencies),
        "probes": len(latencies),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series-per-request", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--probe", type=int, help=argparse.SUPPRESS)  # the prober's own process
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(args.probe, args.seconds)))
        return 0
    r = measure(args.series_per_request, args.concurrency, args.seconds)
    print(
        f"{args.series_per_request} series/request, {args.concurrency} clients, {args.seconds:g} s: "
        f"{r['requests']} requests ({r['errors']} errors), {r['series_per_s']:.0f} series/s\n"
        f"/healthz: p50 {r['healthz_p50_ms']:.1f} ms, p99 {r['healthz_p99_ms']:.1f} ms, "
        f"max {r['healthz_max_ms']:.1f} ms over {r['probes']} probes"
    )
    return 1 if r["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
