"""The anomaly check after a spike or a level shift, step by step (issue 45, item 1): what docs/backtest.md's
"Repair" table prints.

A global model (the hybrid, `export.panel train`'s default: input length, local half and random layer chosen
on validation) is trained on every M3 series of one frequency minus its last H values and exported with
intervals; every whole series (`x` then `xx`) is checked through `/v1/.../detect_anomalies` (in-process:
`create_app`, a TestClient), its last H points at `--level`, `--lead` steps ahead. Then one event per series
at a random checked point (a spike: one value moved; a shift: every value from it on), of `--size` half-widths
(the clean check's at that point), signs alternating; the flag rate at each number of steps after the event is
printed with the repair and without it, beside the clean data's at the same points.

    .venv/bin/python -m bench.anomaly_echo [--frequency quarterly] [--lead 1] [--level 95] [--size 8]
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frequency", default="quarterly", help="an M3 frequency: monthly, quarterly, yearly")
    p.add_argument("--lead", type=int, default=1)
    p.add_argument("--level", type=float, default=95.0)
    p.add_argument("--size", type=float, default=8.0, help="in interval half-widths")
    p.add_argument("--limit", type=int, default=None, help="the first N series (all)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def by_lag(flags: np.ndarray, where: np.ndarray) -> np.ndarray:
    """The flag rate at each number of steps after the events [H]."""
    H = flags.shape[1]
    hits, count = np.zeros(H), np.zeros(H)
    for f, j in zip(flags, where, strict=True):
        hits[: H - j] += f[j:]
        count[: H - j] += 1
    return hits / np.maximum(count, 1)


def main(argv: Sequence[str] | None = None) -> None:
    from app.core.config import Settings
    from bench.competition_data import load_competition
    from bench.harness.in_process import serve_in_process
    from export.global_models.config import PanelConfig
    from export.global_models.onnx import calibrate_global, export_global
    from export.global_models.search import train_global

    args = parse_args(argv)
    comp = load_competition("M3", args.frequency, args.limit)
    H = comp.horizon
    frequency = {12: "1MS", 4: "3MS", 1: "12MS"}[comp.period]
    config = PanelConfig(horizon=H, period=comp.period, lift=None)  # `export.panel train`'s default
    model = train_global(comp.train, config, frequency, local=True)
    intervals, said = calibrate_global(model, comp.train)
    print(f"M3 {args.frequency}: {len(comp.train)} series, L = {model.input_length}; {said}")
    series = [np.concatenate([x, y]) for x, y in zip(comp.train, comp.test, strict=True)]
    repo = Path(tempfile.mkdtemp(prefix="anomaly_echo_"))
    export_global(model, repo, "m3", 1, "y", intervals)
    settings = Settings(
        model_repository=repo,
        models=["m3"],
        device="cpu",
        max_series_per_request=len(series) * H,
        max_body_bytes=512 * 2**20,
        request_timeout_s=600.0,
    )
    with serve_in_process(settings) as client:

        def check(values: list[np.ndarray], repair: bool) -> list[dict]:
            body = {
                "series": [{"values": v.tolist()} for v in values],
                "level": args.level,
                "lead": args.lead,
                "last": H,
                "repair": repair,
            }
            r = client.post("/v1/models/m3/detect_anomalies", json=body)
            r.raise_for_status()
            return list(r.json()["series"])

        def flags(answer: list[dict]) -> np.ndarray:
            return np.array([np.array(s["anomaly"])[:, 0] for s in answer])

        clean = check(series, True)
        rng = np.random.default_rng(args.seed)
        where = rng.integers(0, H, len(series))
        rows = {}
        for kind in ("spike", "shift"):
            moved = []
            for i, (v, answer, j) in enumerate(zip(series, clean, where, strict=True)):
                half = answer["hi"][j][0] - answer["forecast"][j][0]
                w, at = v.copy(), len(v) - H + int(j)
                size = args.size * half * (1 if i % 2 else -1)
                if kind == "spike":
                    w[at] += size
                else:
                    w[at:] += size
                moved.append(w)
            rows[f"{kind}, repair"] = by_lag(flags(check(moved, True)), where)
            rows[f"{kind}, no repair"] = by_lag(flags(check(moved, False)), where)
        rows["clean data, same points"] = by_lag(flags(clean), where)
    print(f"level {args.level:g}, lead {args.lead}, events of {args.size:g} half-widths; steps after:")
    print(f"| {'':<24}|" + "|".join(f"{k:>6} " for k in range(H)) + "|")
    for name, rate in rows.items():
        print(f"| {name:<24}|" + "|".join(f"{x:>6.3f} " for x in rate) + "|")


if __name__ == "__main__":
    main()
