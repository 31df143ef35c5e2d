"""Front ends killed under load (RSA_WORKERS=2): how many calls each kind of caller loses, side by side.

The service (`python -m app`, the shipped repository) runs two front ends; `--callers` threads of each kind
send forecasts of `pretrained-monthly` while one front end is killed (SIGKILL) `--kills` times, each kill
once the supervisor has started the last one again and both listen. A killed front end takes with it the
calls in flight on it and the connections the kernel had queued on its socket (docs/service.md, "One
process or several front ends"). The kinds:

- `rsa_client`: `Client.forecast` (kept-alive connections; a call refused, reset or closed before its
  answer is sent again, twice);
- `kept-alive, no retry`: an httpx.Client posting the same series to `/v1/models/pretrained-monthly/
  forecast`, as rsa_client did before it retried;
- `a connection per call`: httpx.post, the same body.

    .venv/bin/python -m bench.front_end_kills [--kills 10] [--callers 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd

from bench.harness import REPO
from bench.harness.servers import front_ends_of, listens, local_server

MODEL = "pretrained-monthly"
PATH = f"/v1/models/{MODEL}/forecast"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--callers", type=int, default=2, help="threads of each kind")
    p.add_argument("--timeout-s", type=float, default=120.0, help="bound on the whole run")
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def callers(url: str) -> dict[str, Callable[[], tuple[Callable[[], object], Callable[[], None]]]]:
    """Each kind: a factory of its call and of what closes it (one per thread: its own connections)."""
    months = pd.date_range("2015-01-01", periods=72, freq="MS")
    values = 100 + 10 * np.sin(np.arange(72) * 2 * np.pi / 12)
    frame = pd.DataFrame({"unique_id": "a", "ds": months, "y": values})
    body = {"series": [{"values": values.tolist(), "start": "2015-01-01"}], "horizon": 6}

    sys.path.insert(0, str(REPO / "client"))  # the client's own package, as `pip install ./client` puts it
    from rsa_client import Client

    def client_call() -> tuple[Callable[[], object], Callable[[], None]]:
        client = Client(url, timeout_s=30)
        return (lambda: client.forecast(frame, h=6, model=MODEL)), client.close

    def kept_alive() -> tuple[Callable[[], object], Callable[[], None]]:
        http = httpx.Client(base_url=url, timeout=30)
        return (lambda: http.post(PATH, json=body).raise_for_status()), http.close

    def per_call() -> tuple[Callable[[], object], Callable[[], None]]:
        return (lambda: httpx.post(url + PATH, json=body, timeout=30).raise_for_status()), lambda: None

    return {"rsa_client": client_call, "kept-alive, no retry": kept_alive, "a connection per call": per_call}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    env = {"RSA_WORKERS": "2", "RSA_MODEL_REPOSITORY": str(REPO / "model_repository")}
    tallies: list[tuple[Counter[str], Counter[str], Counter[str]]] = []  # per thread: answered, lost, why
    stop = threading.Event()
    with local_server(env) as server:
        port = int(server.url.rsplit(":", 1)[1])
        kinds = callers(server.url)

        def run(kind: str) -> None:
            answered, lost, why = Counter[str](), Counter[str](), Counter[str]()
            tallies.append((answered, lost, why))
            call, close = kinds[kind]()
            while not stop.is_set():
                try:
                    call()
                    answered[kind] += 1
                except Exception as e:  # every failure is a lost call (a ServiceError too)
                    lost[kind] += 1
                    why[f"{kind}: {type(e).__name__}"] += 1
            close()

        threads = [threading.Thread(target=run, args=(k,)) for k in kinds for _ in range(args.callers)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + args.timeout_s
        kills = 0
        try:
            while kills < args.kills and time.monotonic() < deadline:
                fronts = front_ends_of(server.process.pid)
                if len(fronts) < 2 or not all(listens(f, port) for f in fronts):  # both serving
                    time.sleep(0.1)
                    continue
                time.sleep(1.0)  # calls on both
                try:
                    os.kill(fronts[0], signal.SIGKILL)
                except ProcessLookupError:  # gone meanwhile (the supervisor's restart of a stuck one)
                    continue
                kills += 1
                time.sleep(1.0)
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
    answered, lost, why = (sum((t[i] for t in tallies), Counter[str]()) for i in range(3))
    report = {
        "kills": kills,
        "callers_per_kind": args.callers,
        "kinds": {k: {"answered": answered[k], "lost": lost[k]} for k in kinds},
        "lost_by_error": dict(why),
    }
    print(f"{kills} front-end kills under load, {args.callers} callers of each kind")
    print("| caller | calls answered | calls lost |\n|---|---|---|")
    for k in kinds:
        print(f"| {k} | {answered[k]:,} | {lost[k]} |")
    if why:
        print("lost by error: " + ", ".join(f"{k} {n}" for k, n in why.items()))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
