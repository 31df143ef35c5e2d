"""Missing values in served windows against the model's own interval coverage (issue 36, item 5).

The shipped model (model_repository, etth1-rsa's newest version folder, asked for by number) is served
in-process (`create_app`, a TestClient: the real /v1 request path) and asked for 80% and 95% intervals on
real ETTh1 test windows (L = 512), once as they are and once with a random 10% of each window's values
sent as `null` (filled by the model's training rule, counted in `filled`). Coverage: the share of the
true next H values inside each band, over every window, channel and step. The target: the 10%-missing
coverage within 3 points of the complete one at both levels.

    .venv/bin/python -m bench.missing_values [--windows 96] [--missing 0.1]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.artifacts.manifest import load_manifest
from app.artifacts.publish import version_numbers
from app.core.config import Settings
from bench.harness.in_process import serve_in_process
from export.data import load_dataset

ROOT = Path(__file__).resolve().parents[1]
LEVELS = (80, 95)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repository", type=Path, default=ROOT / "model_repository")
    p.add_argument("--model", default="etth1-rsa")
    p.add_argument("--windows", type=int, default=96, help="test windows, evenly spaced")
    p.add_argument("--missing", type=float, default=0.1, help="share of each window's values sent as null")
    p.add_argument(
        "--pattern",
        choices=("scattered", "block"),
        default="scattered",
        help="scattered: random values; block: one run of rows (every channel) inside the window",
    )
    p.add_argument("--per-request", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def coverage(answers: list[dict[str, Any]], truth: np.ndarray) -> dict[int, float]:
    out = {}
    for level in LEVELS:
        lo = np.array([a[f"lo-{level}"] for a in answers])
        hi = np.array([a[f"hi-{level}"] for a in answers])
        out[level] = float(((truth >= lo) & (truth <= hi)).mean() * 100)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    folder = args.repository / args.model / str(version_numbers(args.repository / args.model)[-1])
    manifest = load_manifest(folder / "manifest.json")
    L, H = manifest.input_length, manifest.horizon
    ds = load_dataset(ROOT / "data/ETT/ETTh1.csv", L, H, protocol=manifest.dataset["protocol"])
    first = ds.borders["test"][0]
    starts = np.linspace(0, ds.test.num_windows - 1, args.windows).round().astype(int) + first
    values, stamps = ds.series.values, ds.series.timestamps
    rng = np.random.default_rng(args.seed)
    settings = Settings(
        model_repository=args.repository, models=[args.model], device="cpu", intra_op_threads=2
    )
    results: dict[str, list[dict[str, Any]]] = {"complete": [], "missing": []}
    filled = 0
    with serve_in_process(settings) as client:
        for chunk in np.array_split(starts, max(1, len(starts) // args.per_request)):
            for kind in results:
                series = []
                for s in chunk:
                    window: list[list[Any]] = values[s : s + L].tolist()
                    if kind == "missing":
                        C = len(manifest.channels)
                        if args.pattern == "block":
                            run = round(args.missing * L)
                            at = int(rng.integers(0, L - run + 1))
                            holes = np.array([t * C + c for t in range(at, at + run) for c in range(C)])
                        else:
                            holes = rng.choice(L * C, round(args.missing * L * C), replace=False)
                        for h in holes:
                            window[h // C][h % C] = None
                    start = str(np.datetime_as_string(stamps[s], unit="s")) + "Z"
                    series.append({"values": window, "start": start})
                url = f"/v1/models/{args.model}/versions/{folder.name}/forecast"
                r = client.post(url, json={"series": series, "level": list(LEVELS)})
                r.raise_for_status()
                answers = r.json()["forecasts"]
                filled += sum(a.get("filled", 0) for a in answers)
                results[kind].extend(answers)
    truth = np.stack([values[s + L : s + L + H] for s in starts])
    report = {
        "model": f"{args.model}/{folder.name}",
        "windows": len(starts),
        "missing_share": args.missing,
        "pattern": args.pattern,
    }
    for kind, answers in results.items():
        forecast = np.array([a["forecast"] for a in answers])
        report[kind] = {
            "coverage": coverage(answers, truth),
            "mse_raw": float(((forecast - truth) ** 2).mean()),
        }
    report["filled_values"] = filled
    report["gap_points"] = {
        level: round(report["missing"]["coverage"][level] - report["complete"]["coverage"][level], 2)
        for level in LEVELS
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
