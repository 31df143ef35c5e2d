"""One series forecast without a model (`POST /v1/forecast`, issue 47 item 5) against the same
pretrained model named (`POST /v1/models/pretrained-monthly/forecast`): the service on the shipped
repository, one monthly series of 60 values with its start and the 80% interval, the two routes
interleaved request by request over one keep-alive connection (bounded in count and time); p50 and p90
of each, and the ratio of the p50s. A third body sends the series' 60 timestamps instead of its start
(the frequency read from their gaps, rsa_core.frequency), interleaved with the other two.

    python -m bench.zero_shot_latency --requests 300 --json results/zero_shot/latency.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import numpy as np

from bench.harness import REPO
from bench.harness.report import write_json
from bench.harness.servers import local_server

MODEL = "pretrained-monthly"


def measure(url: str, requests: int, max_seconds: float) -> dict[str, list[float]]:
    """Seconds of each answered request per route, the routes alternating (the first 20 of each: warm-up,
    dropped)."""
    rng = np.random.default_rng(0)
    values = [float(v) for v in 1000 + 100 * np.sin(np.arange(60) * np.pi / 6) + rng.normal(0, 10, 60)]
    body = {"series": [{"id": "one", "start": "2020-01-01", "values": values}], "level": [80]}
    stamps = [f"{2020 + m // 12}-{m % 12 + 1:02d}-01" for m in range(60)]
    stamped = {"series": [{"id": "one", "timestamps": stamps, "values": values}], "level": [80]}
    routes = {
        "zero_shot": ("/v1/forecast", body),
        "named": (f"/v1/models/{MODEL}/forecast", body),
        "zero_shot_timestamps": ("/v1/forecast", stamped),
    }
    seconds: dict[str, list[float]] = {k: [] for k in routes}
    began = time.monotonic()
    with httpx.Client(base_url=url, timeout=30) as client:
        for i in range(requests + 20):
            if time.monotonic() - began > max_seconds:
                break
            for key, (path, sent) in routes.items() if i % 2 == 0 else reversed(routes.items()):
                start = time.perf_counter()
                r = client.post(path, json=sent)
                took = time.perf_counter() - start
                r.raise_for_status()
                assert r.json()["model"] == MODEL
                if i >= 20:
                    seconds[key].append(took)
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=300, help="per route, after 20 of warm-up")
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    env = {"RSA_MODEL_REPOSITORY": str(REPO / "model_repository"), "RSA_MODELS": MODEL, "RSA_DEVICE": "cpu"}
    with local_server(env) as server:
        seconds = measure(server.url, args.requests, args.max_seconds)
    report: dict[str, object] = {"requests": {k: len(v) for k, v in seconds.items()}}
    for key, s in seconds.items():
        report[f"{key}_p50_ms"] = 1000 * statistics.median(s)
        report[f"{key}_p90_ms"] = 1000 * float(np.quantile(s, 0.9))
    report["p50_ratio"] = report["zero_shot_p50_ms"] / report["named_p50_ms"]  # type: ignore[operator]
    timestamps_ratio = report["zero_shot_timestamps_p50_ms"] / report["named_p50_ms"]  # type: ignore[operator]
    report["timestamps_p50_ratio"] = timestamps_ratio
    print(json.dumps(report, indent=2))
    if args.json is not None:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
