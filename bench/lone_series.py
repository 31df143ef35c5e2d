"""Series trained alone, as a user with one series would (`export.panel train`'s defaults: `ours_config`,
the hybrid), beside statsforecast's models on the same series in the same run.

    python -m bench.lone_series --short --json results/competitions/lone_short.json     # about 5 minutes
    python -m bench.lone_series --data M1:quarterly --sample 200 --json results/competitions/lone_m1q.json
    python -m bench.lone_series --data M1:quarterly --sample 200 --search-origins 2     # the rule before

`--short`: every history shorter than the default training windows need, train_min + 2H values (two cycles
of input for a training window, its H targets, and the H values validation holds out): 340 of M3 monthly's
1,428 histories (48-58 months at H 18). Until 2026-12-07 `export.panel train` refused every such lone
series; its windows now need what the series leaves (`PanelConfig.fitted_to`). `--sample N`: N series drawn
(seed 0) from every one. `--search-origins K`: the search validated at K origins whatever the series count
(2: the rule before few series got rolling origins and a fixed local half, export/global_models/hybrid.py
`search_origins`, `fixed_local`: every set and window searched).

Per set: how many were trained, how many of them too short to validate (fewer than min_history + 2H
values: fixed choices, export/global_models/search.py `train_global`; their scores also apart), how many
refused (fewer than min_history + H), how many chose the read-out alone, the mean MASE on the official
hold-out of ours, of its read-out alone, of its local half alone (the chosen members in equal shares, no
read-out) and of statsforecast's models and their StatisticalEnsemble (the competitions bench's peers,
fitted per series), and the levels the exporter's calibration gave them (`calibrate_global`) with the
coverage where it gave 80%."""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.competition_data import ALL_DATA, HELD_BACK_COMPETITIONS
from bench.harness.report import write_json
from bench.zero_shot_served import MODELS, served_forecasts, shipped_server

SETS = (*ALL_DATA, *HELD_BACK_COMPETITIONS)


def chosen_series(comp: Any, short: bool, sample: int) -> tuple[list[int], str]:
    """The series to train alone, and how they were chosen."""
    from bench.competition_ours import ours_config

    if short:
        cfg = ours_config(comp)
        need = cfg.train_min + 2 * comp.horizon
        return [i for i, v in enumerate(comp.train) if len(v) < need], (
            f"fewer than train_min + 2H = {cfg.train_min} + 2 × {comp.horizon} values"
        )
    order = np.random.default_rng(0).permutation(len(comp.train))
    return sorted(order[:sample].tolist()), f"{min(sample, len(order))} drawn (seed 0)"


def one_set(
    name: str, short: bool, sample: int, search_origins: int | None, n_jobs: int, url: str | None = None
) -> dict[str, Any]:
    from unittest import mock

    from app.inference.metrics import mase
    from bench.competition_data import load_competition
    from bench.competition_ours import ours_config
    from bench.competition_peers import ENSEMBLE, ENSEMBLE_MEMBERS, STATS_MODELS, ensemble, run_statsforecast
    from export.global_models import search
    from export.global_models.onnx import DEFAULT_LEVELS, calibrate_global, interval_halfwidths

    dataset, frequency = name.split(":")
    comp = load_competition(dataset, frequency)
    cfg = ours_config(comp)
    period = comp.period
    picked, how = chosen_series(comp, short, sample)
    out: dict[str, Any] = {"data": name, "series": len(comp.train), "picked": len(picked), "how": how}
    if not picked:
        return out
    frequency_code = {12: "1MS", 4: "3MS", 1: "12MS"}.get(period, "1D")
    trained, refused, readout_alone, unvalidated = [], 0, 0, []
    ours: list[np.ndarray] = []
    alone: list[np.ndarray] = []
    local: list[np.ndarray] = []
    got: dict[str, int] = {}
    inside: list[np.ndarray] = []
    calibrated: list[int] = []  # the trained series the exporter gave 80% (rows of `sub`)

    def forced() -> contextlib.ExitStack[Any]:
        """K origins whatever the count, few series' fixed half only where K > 2 (a new stack per use)."""
        stack = contextlib.ExitStack()
        if search_origins is not None:
            stack.enter_context(mock.patch.object(search, "search_origins", lambda n: search_origins))
            stack.enter_context(mock.patch.object(search, "few_series", lambda n: search_origins > 2))
        return stack

    start = time.perf_counter()
    for i in picked:
        train = [comp.train[i]]
        try:
            with forced():
                model = search.train_global(train, cfg, frequency_code, local=True)
        except ValueError:  # shorter than min_history + H: refused, saying what it needs
            refused += 1
            continue
        trained.append(i)
        if model.search.get("origins") == 0:  # too short to validate: fixed choices (`train_global`)
            unvalidated.append(len(trained) - 1)
        point = model.forecast(train)
        ours.append(point[0])
        readout = copy.copy(model)
        readout.local = None
        alone.append(readout.forecast(train)[0])
        if model.local is None:
            readout_alone += 1
            local.append(point[0])
        else:
            k = len(model.local.members)
            members = copy.copy(model)
            members.local = dataclasses.replace(model.local, weights=(1.0 / k,) * k, tilt=None)
            local.append(members.forecast(train)[0])
        intervals, _ = calibrate_global(model, train, DEFAULT_LEVELS)
        levels = [] if intervals is None else [lv for lv in intervals["levels"] if lv >= 80]
        key = "/".join(f"{lv:g}" for lv in levels) or "none above 50"
        got[key] = got.get(key, 0) + 1
        if intervals is not None and 80.0 in intervals["levels"]:
            calibrated.append(len(trained) - 1)
            half = interval_halfwidths(intervals, model, train)[list(intervals["levels"]).index(80.0)]
            inside.append(np.abs(comp.test[i] - point[0]) <= half[0])
    seconds = time.perf_counter() - start
    out.update(
        trained=len(trained),
        refused=refused,
        unvalidated=len(unvalidated),
        readout_alone_chosen=readout_alone,
        ours_seconds=round(seconds, 1),
        levels=got,
    )
    if not trained:
        return out
    sub = dataclasses.replace(
        comp,
        ids=[comp.ids[i] for i in trained],
        train=[comp.train[i] for i in trained],
        test=comp.test[trained],
    )
    peers = run_statsforecast(sub, STATS_MODELS, n_jobs=n_jobs)
    peers.append(ensemble([f for f in peers if f.model in ENSEMBLE_MEMBERS]))
    # The shipped model of the set's cycle through the service, on the same series (docs/pretrained.md):
    # what a user with one series gets without training; it saw M3's and Tourism's histories, not M1's.
    shipped = served_forecasts(url, sub) if url is not None and period in MODELS else None

    def score(point: np.ndarray, rows: Sequence[int] | None = None) -> float:
        pick = list(range(len(trained))) if rows is None else list(rows)
        train = [sub.train[j] for j in pick]
        return round(float(mase(train, sub.test[pick], np.asarray(point)[pick], period).mean()), 4)

    def table_of(rows: Sequence[int] | None = None) -> dict[str, float]:
        scores = {
            "ours (the hybrid)": score(np.array(ours), rows),
            "ours: read-out alone": score(np.array(alone), rows),
            "ours: local half alone": score(np.array(local), rows),
        }
        scores |= {f.model: score(f.point, rows) for f in peers}
        if shipped is not None:
            scores[f"shipped {MODELS[period]} (zero-shot)"] = score(shipped[0], rows)
        return dict(sorted(scores.items(), key=lambda kv: kv[1]))

    out["mase"] = table_of()
    if unvalidated:  # the series trained without validation, apart
        out["mase_unvalidated"] = table_of(unvalidated)
    out["peers_seconds"] = round(sum(f.fit_s + f.forecast_s for f in peers if f.model != ENSEMBLE), 1)
    out["coverage_80"] = (
        {"series": len(inside), "coverage": round(float(np.concatenate(inside).mean()), 4)}
        if inside
        else None
    )
    if shipped is not None:
        within = (sub.test >= shipped[1]) & (sub.test <= shipped[2])  # [trained, H]
        out["coverage_80_shipped"] = {
            "series": len(trained),
            "coverage": round(float(within.mean()), 4),
            "where_ours_has_80": round(float(within[calibrated].mean()), 4) if calibrated else None,
        }
    return out


def table(r: dict[str, Any]) -> str:
    head = f"{r['data']}: {r['picked']} of {r['series']} series, {r['how']}"
    if "trained" not in r:
        return head
    lines = [
        head + f"; trained {r['trained']} ({r.get('unvalidated', 0)} too short to validate), refused "
        f"{r['refused']}, the read-out alone chosen for "
        f"{r['readout_alone_chosen']}; levels got {r['levels']}"
    ]
    for model, v in r.get("mase", {}).items():
        lines.append(f"  {model:<28} MASE {v:.4f}")
    for model, v in r.get("mase_unvalidated", {}).items():
        lines.append(f"  too short to validate: {model:<28} MASE {v:.4f}")
    if r.get("coverage_80"):
        c = r["coverage_80"]
        lines.append(f"  80% interval: {c['series']} series, coverage {c['coverage']:.3f}")
    if r.get("coverage_80_shipped"):
        c = r["coverage_80_shipped"]
        lines.append(
            f"  the shipped model's 80% interval: {c['series']} series, coverage {c['coverage']:.3f}"
            + (
                f" ({c['where_ours_has_80']:.3f} on those ours has one)"
                if c["where_ours_has_80"] is not None
                else ""
            )
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from bench.competitions import _code_state

    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument(
        "--data", action="append", choices=SETS, help="one set (repeatable; default: M3, Tourism)"
    )
    parser.add_argument("--short", action="store_true", help="the series too short for the default windows")
    parser.add_argument("--sample", type=int, default=200, help="without --short: series drawn per set")
    parser.add_argument("--search-origins", type=int, default=None, help="validate at this many origins")
    parser.add_argument("--n-jobs", type=int, default=2, help="statsforecast's processes")
    parser.add_argument(
        "--no-shipped", action="store_true", help="leave out the shipped pretrained models (no service)"
    )
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    state = _code_state()
    start = time.perf_counter()
    reports = []
    with contextlib.nullcontext(None) if args.no_shipped else shipped_server() as server:
        for name in args.data or ALL_DATA:
            url = None if server is None else server.url
            reports.append(one_set(name, args.short, args.sample, args.search_origins, args.n_jobs, url))
            print(table(reports[-1]), flush=True)
    if args.json is not None:
        write_json(
            args.json,
            {
                "kind": "lone_series",
                "command": "python -m bench.lone_series"
                + "".join(f" --data {d}" for d in args.data or [])
                + (" --short" if args.short else f" --sample {args.sample}")
                + (f" --search-origins {args.search_origins}" if args.search_origins else "")
                + (" --no-shipped" if args.no_shipped else "")
                + f" --n-jobs {args.n_jobs}",
                "code": _code_state(state),
                "sets": reports,
                "seconds": round(time.perf_counter() - start, 1),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
