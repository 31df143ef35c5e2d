"""The service's backtest against the offline evaluator on the whole ETTh1 test split (issue 38, item 1).

The shipped model (etth1-rsa's newest version folder) is served in-process (`create_app`, a TestClient:
the real /v1 request path) and asked for one `cross_validation` of the test split's rows: every window
of the split (stride 1, horizon H), one request, levels 80 and 95. The offline evaluator
(`export.backtest.evaluate_version`) runs the same version's ONNX graph over the same windows as
calibration does. Target: every metric (MAE, MSE, MASE, sMAPE, coverage per level; pooled and per
channel) within 1e-6 of the offline one. Also timed: the request's wall time beside the offline run's
(same machine, same run; a sanity number, not a target).

    .venv/bin/python -m bench.backtest [--windows N] [--horizon H] [--out results/backtest/etth1.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.artifacts.publish import version_numbers
from app.core.config import Settings
from bench.harness.in_process import serve_in_process
from export.backtest import evaluate_version, split_rows

ROOT = Path(__file__).resolve().parents[1]
LEVELS = (80.0, 95.0)
KEYS = ("mae", "mse", "mase", "smape")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repository", type=Path, default=ROOT / "model_repository")
    p.add_argument("--model", default="etth1-rsa")
    p.add_argument("--windows", type=int, default=None, help="the first N windows (default: all)")
    p.add_argument("--horizon", type=int, default=None, help="default: the model's")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "backtest" / "etth1.json")
    return p.parse_args(argv)


def deltas(served: dict[str, Any], offline: dict[str, Any]) -> list[float]:
    out = [abs(served[k] - offline[k]) for k in KEYS]
    out += [abs(served["coverage"][f"{lv:g}"] - offline["coverage"][f"{lv:g}"]) for lv in LEVELS]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    folder = args.repository / args.model / str(version_numbers(args.repository / args.model)[-1])
    manifest = json.loads((folder / "manifest.json").read_text())
    L, h = manifest["input_length"], args.horizon or manifest["horizon"]
    start, rows = split_rows(folder)
    n = len(rows) - L - manifest["horizon"] + 1  # the split's windows (every one has H targets)
    n = min(n, args.windows) if args.windows else n
    began = time.perf_counter()
    offline = evaluate_version(folder, horizon=h, levels=LEVELS, windows=n)
    offline_s = time.perf_counter() - began
    settings = Settings(
        model_repository=args.repository,
        models=[args.model],
        device="cpu",
        intra_op_threads=2,
        max_series_per_request=max(n, 1024),
        request_timeout_s=600,
    )
    body = {
        "series": [{"id": "ETTh1 test", "start": start, "values": rows[: L + n - 1 + h].tolist()}],
        "horizon": h,
        "n_windows": n,
        "step_size": 1,
        "level": list(LEVELS),
    }
    with serve_in_process(settings) as client:
        began = time.perf_counter()
        r = client.post(f"/v1/models/{args.model}/versions/{folder.name}/cross_validation", json=body)
        served_s = time.perf_counter() - began
    r.raise_for_status()
    answer = r.json()
    channel_deltas = {
        c: max(deltas(answer["series"][0]["channel_metrics"][c], m))
        for c, m in offline["channel_metrics"].items()
    }
    worst = max([*deltas(answer["metrics"], offline["metrics"]), *channel_deltas.values()])
    report = {
        "model": f"{args.model}/{folder.name}",
        "split": "test",
        "windows": n,
        "horizon": h,
        "levels": list(LEVELS),
        "served": answer["metrics"],
        "offline": offline["metrics"],
        "max_abs_delta": worst,
        "max_abs_delta_by_channel": channel_deltas,
        "target": "max |delta| <= 1e-6",
        "met": worst <= 1e-6,
        "served_request_s": round(served_s, 2),
        "offline_s": round(offline_s, 2),
        "command": "python -m bench.backtest",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0 if report["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
