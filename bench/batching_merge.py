"""How much does dynamic batching merge?  One run against a live service on loopback:

    bash scripts/serve.sh &            # or any running instance
    .venv/bin/python -m bench.batching_merge [--url http://127.0.0.1:8000] [--clients 32] [--requests 320]

Sends `requests` single-series forecast requests to the model's latest version from `clients`
concurrent clients (bench.harness's load generator, bounded in count and time; bodies of real windows
from the version's data set, so the service's model_repository must be this checkout's), then reads the
version's batching counters from GET /v1/models/{name} and prints requests per session call and latency
percentiles. Each answer is checked against ONNX Runtime's forecast of its own window.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from bench.harness.load import load_workload
from bench.harness.workloads import prepare_forecast_workload


def latest_version(url: str, model: str) -> dict[str, Any]:
    """The model's last version as GET /v1/models/{name} describes it (http.client, not urllib: urllib
    would honour *_proxy variables, and this traffic stays on loopback)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)
    try:
        conn.request("GET", f"/v1/models/{model}")
        versions: list[dict[str, Any]] = json.loads(conn.getresponse().read())["versions"]
    finally:
        conn.close()
    return versions[-1]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.batching_merge", description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="etth1-rsa")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=320)
    args = ap.parse_args(argv)
    url = args.url.rstrip("/")
    version = latest_version(url, args.model)
    work = prepare_forecast_workload(args.model, version["version"], windows=min(args.requests, 64))
    before = version["batching"]
    result = load_workload(url, work, requests=args.requests, concurrency=args.clients, time_limit_s=300)
    after = latest_version(url, args.model)["batching"]
    calls = after["session_calls"] - before["session_calls"]
    print(
        f"{result.completed} requests from {args.clients} clients in {result.duration_s:.2f} s "
        f"({result.throughput:.0f} req/s), {result.error_count} errors"
    )
    print(f"session calls: {calls}  ->  {result.completed / max(calls, 1):.1f} requests merged per call")
    print(
        f"latency ms: p50 {result.percentile_ms(50):.1f}  p90 {result.percentile_ms(90):.1f}  "
        f"p99 {result.percentile_ms(99):.1f}"
    )
    for sample in result.error_samples:
        print(f"  {sample}")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
