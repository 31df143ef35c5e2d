"""Small forecasts' latency on a model while its backtests or fits run (issue 46, items 5 and 6).

One service process (`python -m app`, default settings) serves the shipped etth1-rsa model and a global
read-out trained on the panel tests' monthly stores (tests/utils/panel.py). One client sends small
forecasts (one series) one after another to a model, pausing `--gap-ms` between them, while:

- idle: nothing else runs;
- backtests: `--backtesters` clients (6) loop maximal backtests on the same model (etth1-rsa: one series,
  RSA_MAX_SERIES_PER_REQUEST = 1,024 windows, step 1, the served weights);
- fits: `--fitters` clients (8) loop maximal fits on the stores model (fit_forecast with levels 80 and 95
  on as many 2,000-value series as the fit-cost estimate admits within 80% of RSA_MAX_FIT_SECONDS);

phases interleaved idle / backtests / idle / fits / idle ... for `--rounds`, each at most `--phase-s`
seconds and `--probes` forecasts. Load clients honour Retry-After on a 503 (a well-behaved client). Per
phase: the forecasts' p50/p99 and statuses, the load's statuses; then p99 under load over the idle p99
of the phases around it (the ratio the issue bounds: within 3x, every forecast 200).

    .venv/bin/python -m bench.fairness [--rounds 2] [--phase-s 20] [--probes 150]

Results: results/fairness.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from app.artifacts.manifest import load_manifest
from app.core.config import Settings
from app.inference.refit import estimated_seconds, fit_work, refit_spec
from bench.harness.servers import local_server
from tests.utils.panel import NAME as STORES
from tests.utils.panel import publish, store

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "fairness.json"
ETTH1 = "etth1-rsa"
START = "2018-01-01T00:00:00Z"  # etth1-rsa aligns a daily cycle to its windows' first timestamps


def p99(xs: list[float]) -> float:
    return float(np.percentile(xs, 99)) if xs else float("nan")


def etth1_rows(n: int) -> list[list[float]]:
    rng = np.random.default_rng(0)
    return (rng.normal(10, 3, size=(n, 7))).round(3).tolist()


def fit_series(repo: Path, budget_s: float) -> tuple[list[dict[str, Any]], float]:
    """As many 2,000-value stores as the estimate admits within 80% of the budget, with levels."""
    manifest = load_manifest(repo / STORES / "1" / "manifest.json")
    spec = refit_spec(manifest, STORES, 1)
    local = manifest.panel.local_spec if manifest.panel is not None else None
    n, chosen = 1, 1
    while n <= 256:
        histories = [store(300 + i, 2000).astype(float) for i in range(n)]
        if estimated_seconds(fit_work(spec, histories, [80.0, 95.0], local)) > 0.8 * budget_s:
            break
        chosen, n = n, n * 2
    histories = [store(300 + i, 2000) for i in range(chosen)]
    estimate = estimated_seconds(fit_work(spec, [h.astype(float) for h in histories], [80.0, 95.0], local))
    return [{"id": f"s{i}", "values": h.tolist()} for i, h in enumerate(histories)], estimate


class Loop(threading.Thread):
    """POSTs `body` to `url` until stopped, counting statuses; sleeps Retry-After on a 503, and on a 422
    `evaluation_too_long` (a backtest that would not finish in the deadline on this host now) sends the
    `n_windows` it names from then on, as its message asks: a well-behaved client."""

    def __init__(self, url: str, body: bytes, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url, self.body, self.stop = url, body, stop
        self.statuses: Counter[str] = Counter()
        self.seconds: list[float] = []
        self.windows: list[int] = []  # the n_windows each answered backtest asked for

    def run(self) -> None:
        with httpx.Client(timeout=120) as client:
            while not self.stop.is_set():
                t = time.perf_counter()
                try:
                    r = client.post(self.url, content=self.body, headers={"content-type": "application/json"})
                except httpx.HTTPError as e:
                    self.statuses[type(e).__name__] += 1
                    continue
                self.seconds.append(time.perf_counter() - t)
                self.statuses[str(r.status_code)] += 1
                if r.status_code == 503:
                    self.stop.wait(float(r.headers.get("retry-after", "1")))
                elif r.status_code == 200 and "cross_validation" in self.url:
                    self.windows.append(int(json.loads(self.body)["n_windows"]))
                elif r.status_code == 422 and r.json()["error"].get("code") == "evaluation_too_long":
                    fits = int(r.json()["error"]["limit"])
                    if fits < 1:
                        self.stop.wait(1.0)
                        continue
                    self.body = json.dumps({**json.loads(self.body), "n_windows": fits}).encode()


def phase(
    url: str, probe: bytes, load: Callable[[], list[Loop]], phase_s: float, probes: int, gap_s: float
) -> dict[str, Any]:
    loops = load()
    for loop in loops:
        loop.start()
    time.sleep(min(2.0, phase_s / 4) if loops else 0.0)  # the load under way before the first probe
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    end = time.perf_counter() + phase_s
    with httpx.Client(timeout=60) as client:
        while len(latencies) < probes and time.perf_counter() < end:
            t = time.perf_counter()
            r = client.post(url, content=probe, headers={"content-type": "application/json"})
            latencies.append(time.perf_counter() - t)
            statuses[str(r.status_code)] += 1
            time.sleep(gap_s)
    for loop in loops:
        loop.stop.set()
    for loop in loops:
        loop.join(timeout=150)
    load_statuses: Counter[str] = Counter()
    load_seconds: list[float] = []
    windows: list[int] = []
    for loop in loops:
        load_statuses.update(loop.statuses)
        load_seconds += loop.seconds
        windows += loop.windows
    return {
        "forecasts": len(latencies),
        "p50_ms": round(1000 * statistics.median(latencies), 2),
        "p99_ms": round(1000 * p99(latencies), 2),
        "max_ms": round(1000 * max(latencies), 2),
        "statuses": dict(statuses),
        "load_statuses": dict(load_statuses),
        "load_p50_s": round(statistics.median(load_seconds), 3) if load_seconds else None,
        **({"backtest_windows_answered": windows} if windows else {}),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--phase-s", type=float, default=20.0)
    p.add_argument("--probes", type=int, default=150)
    p.add_argument("--gap-ms", type=float, default=50.0)
    p.add_argument("--backtesters", type=int, default=6)
    p.add_argument("--fitters", type=int, default=8)
    p.add_argument("--out", type=Path, default=OUT)
    return p.parse_args(argv)


def request_bodies(fits: list[dict[str, Any]], n: int) -> dict[str, bytes]:
    """The probes (one small series per model), the maximal backtest (`n` windows, step 1) and the fit."""
    L, H = 512, 96
    return {
        "etth1_probe": json.dumps({"series": [{"values": etth1_rows(L), "start": START}]}).encode(),
        "stores_probe": json.dumps({"series": [{"values": store(7, 48).tolist()}]}).encode(),
        "backtest": json.dumps(
            {
                "series": [{"values": etth1_rows(L + n - 1 + H), "start": START}],
                "n_windows": n,
                "step_size": 1,
            }
        ).encode(),
        "fit": json.dumps({"series": fits, "level": [80, 95]}).encode(),
    }


def phase_plan(
    base: str, bodies: dict[str, bytes], args: argparse.Namespace
) -> list[tuple[str, str, str, Callable[[], list[Loop]]]]:
    """(phase, model, probe body, the load's loops) in order: idle / backtests / idle / fits per round,
    then one idle phase on each model."""

    def loops(route: str, body: bytes, k: int) -> Callable[[], list[Loop]]:
        return lambda: [Loop(f"{base}/{route}", body, threading.Event()) for _ in range(k)]

    def none() -> list[Loop]:
        return []

    plan: list[tuple[str, str, str, Callable[[], list[Loop]]]] = []
    for _ in range(args.rounds):
        plan += [
            ("idle", ETTH1, "etth1_probe", none),
            (
                "backtests",
                ETTH1,
                "etth1_probe",
                loops(f"{ETTH1}/cross_validation", bodies["backtest"], args.backtesters),
            ),
            ("idle", STORES, "stores_probe", none),
            (
                "fits",
                STORES,
                "stores_probe",
                loops(f"{STORES}/fit_forecast", bodies["fit"], args.fitters),
            ),
        ]
    plan += [("idle", ETTH1, "etth1_probe", none), ("idle", STORES, "stores_probe", none)]
    return plan


def ratios_under_load(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per load kind: the worst p99 under it over the median idle p99 on its model, and whether every
    forecast under it was answered 200."""
    ratios = {}
    for kind, model in (("backtests", ETTH1), ("fits", STORES)):
        idle = [r["p99_ms"] for r in results if r["phase"] == "idle" and r["model"] == model]
        busy = [r["p99_ms"] for r in results if r["phase"] == kind]
        ok = all(set(r["statuses"]) == {"200"} for r in results if r["phase"] == kind)
        ratios[kind] = {
            "model": model,
            "idle_p99_ms": idle,
            "loaded_p99_ms": busy,
            "ratio_of_worst_to_median_idle": round(max(busy) / statistics.median(idle), 2),
            "every_forecast_200": ok,
        }
    return ratios


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(model_repository=Path("."))  # the defaults the service runs with
    with tempfile.TemporaryDirectory() as tmp:
        repo, _ = publish(Path(tmp))
        shipped = max((ROOT / "model_repository" / ETTH1).iterdir(), key=lambda f: int(f.name))
        (repo / ETTH1).mkdir()
        (repo / ETTH1 / shipped.name).symlink_to(shipped, target_is_directory=True)
        fits, fit_estimate = fit_series(repo, settings.max_fit_seconds)
        n = settings.max_series_per_request
        bodies = request_bodies(fits, n)
        with local_server({"RSA_MODEL_REPOSITORY": str(repo)}) as server:
            base = f"{server.url}/v1/models"
            results = []
            for kind, model, probe, load in phase_plan(base, bodies, args):
                row: dict[str, Any] = {"phase": kind, "model": model}
                row.update(
                    phase(
                        f"{base}/{model}/forecast",
                        bodies[probe],
                        load,
                        args.phase_s,
                        args.probes,
                        args.gap_ms / 1000,
                    )
                )
                results.append(row)
                print(json.dumps(row), flush=True)
    ratios = ratios_under_load(results)
    out = {
        "command": "python -m bench.fairness "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
        "settings": {
            "max_evaluations_in_flight": settings.max_evaluations_in_flight,
            "evaluation_call_rows": settings.evaluation_call_rows,
            "max_fits_in_flight": settings.max_fits_in_flight,
            "max_fit_seconds": settings.max_fit_seconds,
        },
        "backtest": {"model": ETTH1, "windows": n, "clients": args.backtesters},
        "fit": {
            "model": STORES,
            "series": len(fits),
            "values_each": 2000,
            "levels": [80, 95],
            "estimated_s": round(fit_estimate, 2),
            "clients": args.fitters,
        },
        "phases": results,
        "ratios": ratios,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(ratios, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
