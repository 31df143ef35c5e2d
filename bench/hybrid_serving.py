"""The hybrid default model served: every M3 monthly series forecast through the running service by the
Python client's `forecast(df)`, local models included, timed, and checked against the exporter's numpy
forecast (the benchmark's numbers, bench/competitions.py).

The hybrid (export/global_models/hybrid.py) is trained on the 1,428 M3 monthly histories, calibrated and
exported into a temporary repository, served by `python -m app` on loopback, then
`Client.forecast(df, level=[80])` is called `--rounds` times on the whole panel (one call; the client
splits it into the requests it sends). Prints the median and each round's seconds, and the largest
relative difference to the numpy forecast.

    python -m bench.hybrid_serving --rounds 5 --json results/competitions/hybrid_serving.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bench.competition_data import load_competition
from bench.harness import REPO
from bench.harness.report import write_json
from bench.harness.servers import local_server
from export.global_models.config import PanelConfig
from export.global_models.onnx import calibrate_global, export_global
from export.global_models.search import train_global


def long_frame(ids: Sequence[str], histories: Sequence[np.ndarray]) -> pd.DataFrame:
    """`unique_id, ds, y`: each series' values on month starts ending in 2000-12 (M3's own dates are not
    in the wheel's histories; the forecast does not read them)."""
    frames = []
    for sid, v in zip(ids, histories, strict=True):
        ds = pd.date_range(end="2000-12-01", periods=len(v), freq="MS")
        frames.append(pd.DataFrame({"unique_id": sid, "ds": ds, "y": v}))
    return pd.concat(frames, ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    sys.path.insert(0, str(REPO / "client"))  # the client's own package, as `pip install ./client` puts it
    from rsa_client import Client

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--limit", type=int, default=None, help="the first N series only (a smoke run)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    comp = load_competition("M3", "monthly", args.limit)
    cfg = PanelConfig(horizon=comp.horizon, period=comp.period, lift=None)  # export.panel train's default
    model = train_global(comp.train, cfg, local=True)
    model.frequency = "1MS"
    intervals, _ = calibrate_global(model, comp.train)
    want = model.forecast(comp.train)
    frame = long_frame(comp.ids, comp.train)
    with tempfile.TemporaryDirectory() as tmp:
        export_global(model, Path(tmp), "m3-monthly", intervals=intervals)
        with local_server({"RSA_MODEL_REPOSITORY": tmp, "RSA_MODELS": "m3-monthly"}) as server:
            client = Client(server.url)
            seconds, answer = [], None
            for _ in range(args.rounds):
                start = time.perf_counter()
                answer = client.forecast(frame, level=[80], model="m3-monthly")
                seconds.append(time.perf_counter() - start)
    assert answer is not None
    order = {sid: i for i, sid in enumerate(comp.ids)}
    got = np.empty_like(want)
    for sid, rows in answer.groupby("unique_id", sort=False):
        got[order[str(sid)]] = rows.sort_values("ds")["m3-monthly"].to_numpy(dtype=np.float64)  # the model's
    rel = float((np.abs(got - want) / (1.0 + np.abs(want))).max())
    report = {
        "series": len(comp.ids),
        "local_length": model.local.length if model.local is not None else None,
        "input_length": model.input_length,
        "rounds_s": seconds,
        "median_s": statistics.median(seconds),
        "max_rel_diff_to_numpy": rel,
    }
    print(json.dumps(report, indent=2))
    if args.json is not None:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
