"""Zero-shot evaluation of a pretrained model (issue 47, item 4): leave-one-dataset-out and in-domain,
beside statsforecast's AutoETS fitted in the same run and fev's published zero-shot numbers.

For each evaluated set (M3 and Tourism at `--frequency`, monthly by default: the official hold-outs,
bench/competitions.py's protocol) the model of `export.pretrained` (the hybrid, `train_pretrained`: the
shipped pretrained model's settings, horizon 24 monthly, 8 quarterly, 6 yearly, its first H steps
scored) is trained on the histories of

- the other set only: zero-shot, it never saw a series of the evaluated set (leave-one-dataset-out);
- the evaluated set only: in-domain;
- both (`--pooled`): the shipped pretrained-monthly's training data (its histories, never a hold-out);

its intervals calibrated on its own training series, each evaluated series' widths scaled by that
series' own seasonal-naive error (the service's rule). MASE, sMAPE, WQL (quantiles 0.1-0.9 from the
20/40/60/80% intervals) and the 80% interval's coverage; AutoETS fitted per series on the same
histories in the same run; fev's published MASE and WQL of the foundation models (bench/published.py),
zero-shot on the same series, as a reference.

    python -m bench.zero_shot --json results/zero_shot/report.json
    python -m bench.zero_shot --frequency yearly --json results/zero_shot/report_yearly.json
    python -m bench.zero_shot --limit 40 --no-pooled --no-stats     # a smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.competition_data import Competition, load_competition
from bench.competition_peers import run_statsforecast
from bench.competition_scores import LEVELS, quantiles_from_intervals, score, score_forecast
from bench.harness.report import write_json
from bench.published import PUBLISHED
from bench.published import SOURCE as PUBLISHED_SOURCE
from export.pretrained import SPECS, PretrainedSpec
from export.results_competitions import same_data

SETS = ("M3", "Tourism")  # their series of the frequency evaluated


def _label(trained_on: Sequence[str], evaluated: str, frequency: str) -> str:
    if list(trained_on) == [evaluated]:
        kind = "in-domain"
    elif evaluated not in trained_on:
        kind = "zero-shot"
    else:
        kind = "pooled (the shipped model's data)"
    return f"REM hybrid trained on {' + '.join(f'{d} {frequency}' for d in trained_on)} ({kind})"


def run_model(
    spec: PretrainedSpec, train: dict[str, Competition], evaluated: Competition, trained_on: Sequence[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train `spec`'s model on the histories of `trained_on` and score it on `evaluated`'s hold-outs:
    (the score row, what the model chose)."""
    from export.global_models.onnx import interval_halfwidths
    from export.pretrained import train_pretrained

    series = [x for d in trained_on for x in train[d].train]
    start = time.perf_counter()
    model, intervals, said = train_pretrained(spec, series, local=True, levels=LEVELS)
    fit_s = time.perf_counter() - start
    H = evaluated.horizon
    start = time.perf_counter()
    point = model.forecast(evaluated.train)[:, :H]
    quantiles = None
    if intervals is not None:
        half = interval_halfwidths(intervals, model, evaluated.train)[:, :, :H]  # [levels, S, H]
        bounds = {lv: (point - h, point + h) for lv, h in zip(intervals["levels"], half, strict=True)}
        quantiles = quantiles_from_intervals(point, bounds)
    forecast_s = time.perf_counter() - start
    label = _label(trained_on, evaluated.dataset, spec.frequency)
    row = score(evaluated, label, point, fit_s, forecast_s, quantiles)
    chosen = {
        "trained_on": list(trained_on),
        "series": len(series),
        "input_length": model.input_length,
        "lift": model.config.lift,  # the read-out's random layer's width (0: none)
        "local": None if model.local is None else model.local.to_json(),
        "validation_mase": model.search.get("model"),
        "intervals": said,
    }
    return dataclasses.asdict(row), chosen


def published_rows(name: str, autoets_mase: float | None) -> list[dict[str, Any]]:
    """fev's published (MASE, WQL) of the foundation models on `name` (zero-shot), best MASE first; none
    where this run's AutoETS does not reproduce fev's AutoETS MASE (`same_data`): fev's Tourism yearly
    is other series (results/competitions/README.md)."""
    fev_ets = next((p.scores[name][0] for p in PUBLISHED if p.model == "AutoETS" and name in p.scores), None)
    if autoets_mase is not None and fev_ets is not None and not same_data(autoets_mase, fev_ets):
        return []
    rows = [
        {"model": p.model, "mase": p.scores[name][0], "wql": p.scores[name][1], "file": p.file}
        for p in PUBLISHED
        if p.kind == "foundation" and name in p.scores
    ]
    return sorted(rows, key=lambda r: r["mase"])


def _first(comp: Competition, limit: int | None, least: int = 100) -> Competition:
    """`comp` whole, or (a smoke run) its first `limit` series of at least `least` values (M3's first
    monthly series hold 50: too few for the validation origins of a 24-step model)."""
    if limit is None:
        return comp
    keep = [i for i, x in enumerate(comp.train) if len(x) >= least][:limit]
    return dataclasses.replace(
        comp, ids=[comp.ids[i] for i in keep], train=[comp.train[i] for i in keep], test=comp.test[keep]
    )


def evaluate(
    limit: int | None = None, pooled: bool = True, stats: bool = True, frequency: str = "monthly"
) -> dict[str, Any]:
    """Every evaluated set's rows: the model trained each way, AutoETS, the published references."""
    spec = SPECS[frequency]
    comps = {d: _first(load_competition(d, frequency), limit) for d in SETS}
    report: dict[str, Any] = {
        "protocol": __doc__.split("\n\n")[1].replace("\n", " "),
        "horizon_trained": spec.horizon,
        "published_source": PUBLISHED_SOURCE,
        "sets": {},
    }
    for name, comp in comps.items():
        other = next(d for d in SETS if d != name)
        ways: list[list[str]] = [[other], [name]] + ([list(SETS)] if pooled else [])
        rows, chosen = [], []
        for trained_on in ways:
            row, what = run_model(spec, comps, comp, trained_on)
            rows.append(row)
            chosen.append(what)
            print(f"{comp.name}: {row['model']}: MASE {row['mase']:.3f}", file=sys.stderr)
        ets_mase = None
        if stats:
            ets = run_statsforecast(comp, ["AutoETS"])[0]
            rows.append(dataclasses.asdict(score_forecast(comp, ets)))
            ets_mase = rows[-1]["mase"]
            print(f"{comp.name}: AutoETS: MASE {ets_mase:.3f}", file=sys.stderr)
        report["sets"][comp.name] = {
            "series": len(comp.ids),
            "horizon": comp.horizon,
            "rows": rows,
            "models": chosen,
            "published_zero_shot": published_rows(comp.name, ets_mase) if limit is None else [],
        }
    return report


def format_report(report: dict[str, Any]) -> str:
    """The report as Markdown tables, one per evaluated set."""

    def num(x: float | None, fmt: str) -> str:
        return "" if x is None else format(x, fmt)

    out = []
    for name, part in report["sets"].items():
        out += [
            f"**{name}** ({part['series']} series, H = {part['horizon']})",
            "",
            "| model | MASE | sMAPE | WQL | 80% coverage | fit s |",
            "|---|---|---|---|---|---|",
        ]
        for r in part["rows"]:
            cov = None if r["coverage_80"] is None else 100 * r["coverage_80"]
            out.append(
                f"| {r['model']} | {r['mase']:.3f} | {r['smape']:.2f} | {num(r['wql'], '.4f')} | "
                f"{num(cov, '.1f')} | {r['fit_s']:.1f} |"
            )
        for p in part["published_zero_shot"]:
            out.append(
                f"| {p['model']} (fev, published, zero-shot) | {p['mase']:.4f} | | {p['wql']:.4f} | | |"
            )
        out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--limit", type=int, default=None, help="the first N series of 100 values or more (a smoke run)"
    )
    ap.add_argument("--no-pooled", action="store_true", help="leave out the model trained on both sets")
    ap.add_argument("--no-stats", action="store_true", help="leave out AutoETS")
    ap.add_argument("--frequency", choices=("monthly", "quarterly", "yearly"), default="monthly")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    start = time.perf_counter()
    report = evaluate(
        args.limit, pooled=not args.no_pooled, stats=not args.no_stats, frequency=args.frequency
    )
    report["seconds"] = time.perf_counter() - start
    report["command"] = "python -m bench.zero_shot " + " ".join(argv if argv is not None else sys.argv[1:])
    print(format_report(report))
    if args.json is not None:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
