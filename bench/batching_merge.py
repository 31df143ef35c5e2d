"""How much does dynamic batching merge?  One run against a live service on loopback:

    bash scripts/serve.sh &            # or any running instance
    .venv/bin/python -m bench.batching_merge [--url http://127.0.0.1:8000] [--clients 32] [--requests 320]

Sends `requests` single-series forecast requests from `clients` concurrent clients (bounded in count
and time), then reads the version's batching counters from GET /v1/models/{name} and prints
requests per session call and latency percentiles. Each answer is checked against its own series.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx
import numpy as np


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="etth1-rsa")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=320)
    args = ap.parse_args()
    async with httpx.AsyncClient(base_url=args.url, timeout=30) as http:
        info = (await http.get(f"/v1/models/{args.model}")).json()
        version = info["versions"][-1]
        L, C = version["input_length"], len(version["channels"])
        before = version["batching"]
        rng = np.random.default_rng(0)
        windows = rng.normal(10, 3, size=(args.requests, L, C)).round(3)
        latencies: list[float] = []
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(args.requests):
            queue.put_nowait(i)

        async def client() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                # A start for every series: models with a seasonal cycle need it, others ignore it.
                series = {
                    "id": str(i),
                    "values": windows[i].tolist(),
                    "start": f"2018-01-01T{i % 24:02d}:00:00",
                }
                body = {"series": [series], "horizon": 1}
                t = time.perf_counter()
                r = await http.post(f"/v1/models/{args.model}/forecast", json=body)
                latencies.append(time.perf_counter() - t)
                r.raise_for_status()
                assert r.json()["forecasts"][0]["id"] == str(i)

        t0 = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(client() for _ in range(args.clients))), timeout=300)
        wall = time.perf_counter() - t0
        after = (await http.get(f"/v1/models/{args.model}")).json()["versions"][-1]["batching"]
    calls = after["session_calls"] - before["session_calls"]
    q = statistics.quantiles(latencies, n=100)
    print(
        f"{args.requests} requests from {args.clients} clients in {wall:.2f} s "
        f"({args.requests / wall:.0f} req/s)"
    )
    print(f"session calls: {calls}  ->  {args.requests / max(calls, 1):.1f} requests merged per call")
    print(f"latency ms: p50 {q[49] * 1e3:.1f}  p90 {q[89] * 1e3:.1f}  p99 {q[98] * 1e3:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
