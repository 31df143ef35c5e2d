"""bench/serving.py's report: the run's results (`Report`), its Markdown tables, the issue's targets met
or missed, and the raw results as JSON."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bench.harness import REPO
from bench.harness.measure import Calls, Cell
from bench.harness.report import Target, above, at_least, at_most, format_table, median_target, target
from bench.serving_servers import MODEL_DIR, V1, V2_BINARY, V2_BINARY_LABEL, ServerRun

# The targets. The p99 one is "no worse than the minimal server" (the issue states no number).
MIN_THROUGHPUT_VS_MINIMAL = 0.9
MAX_P99_VS_MINIMAL = 1.0
MAX_P50_OVER_MINIMAL_MS = 0.5
MIN_BIG_VS_RAW = 0.9


@dataclass
class Report:
    config: dict[str, Any]
    raw_small: Calls
    raw_big: Calls
    runs: list[ServerRun]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    duration_s: float
    # Rounds after the first, each the minimal server and the service started afresh one after the
    # other (one-window cells only): the targets against the minimal server are the median of the
    # rounds, each ratio from two servers measured moments apart.
    rounds: list[tuple[ServerRun, ServerRun]] = field(default_factory=list)

    def cell(self, server: str, concurrency: int, series: int = 1, protocol: str = V1) -> Cell | None:
        for run in self.runs:
            for c in run.cells:
                key = (c.concurrency, c.series_per_request, c.protocol)
                if c.server == server and key == (concurrency, series, protocol):
                    return c
        return None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs) and all(a.ok and b.ok for a, b in self.rounds)

    def round_cells(self, concurrency: int) -> list[tuple[Cell | None, Cell | None]]:
        """(service, minimal) one-window cells at this concurrency, round by round, the first run's first."""
        pairs = [(self.cell("service", concurrency), self.cell("minimal", concurrency))]
        for minimal, service in self.rounds:
            pairs.append((_cell_of(service, concurrency), _cell_of(minimal, concurrency)))
        return pairs


def _cell_of(run: ServerRun, concurrency: int) -> Cell | None:
    return next((c for c in run.cells if c.concurrency == concurrency and c.series_per_request == 1), None)


# --------------------------------------------------------------------------------------------------
# The report: Markdown tables, the targets, and the raw results as JSON.


def _flags(cell: Cell) -> str:
    r = cell.result
    notes = []
    if r.error_count:
        notes.append(f"**{r.error_count} errors**")
    if r.stopped_by_time_limit:
        notes.append(f"cut at {r.time_limit_s:.0f} s")
    return f" ({', '.join(notes)})" if notes else ""


def _latency_cell(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    r = cell.result
    return (
        f"{r.throughput:,.0f} req/s · p50 {r.percentile_ms(50):.2f} · p99 {r.percentile_ms(99):.2f} ms"
        + _flags(cell)
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return format_table(header, rows, markdown=True).split("\n")


def _label(run: ServerRun, label: str | None = None) -> str:
    note = " — **failed**" if run.error else " — skipped (not installed)" if run.skipped else ""
    return (label or run.server.label) + note


def throughput_table(report: Report) -> list[str]:
    conc = report.config["concurrency"]
    raw = report.raw_small
    raw_cell = (
        f"{raw.windows_per_s:,.0f} windows/s · p50 {raw.percentile_ms(50):.2f} · "
        f"p99 {raw.percentile_ms(99):.2f} ms"
    )
    rows = [["raw ONNX Runtime in-process, batch 1", raw_cell] + ["—"] * (len(conc) - 1)]
    for run in report.runs:
        rows.append([_label(run), *(_latency_cell(report.cell(run.server.key, c)) for c in conc)])
    return _table(["server", *(f"c={c}" for c in conc)], rows)


def big_table(report: Report) -> list[str]:
    n, c = report.config["big_series"], report.config["big_concurrency"]
    raw = report.raw_big
    rows = [
        [
            f"raw ONNX Runtime in-process, batch {raw.batch}",
            f"{raw.windows_per_s:,.0f}",
            f"{raw.percentile_ms(50):.1f}",
            f"{raw.percentile_ms(99):.1f}",
            "1.00",
        ]
    ]
    for run in report.runs:
        if run.server.takes_big:
            rows.append(_big_row(_label(run), report.cell(run.server.key, c, n), raw))
        if run.server.takes_v2_binary:
            rows.append(
                _big_row(_label(run, V2_BINARY_LABEL), report.cell(run.server.key, c, n, V2_BINARY), raw)
            )
    return _table([f"{n} series per request, c={c}", "windows/s", "p50 ms", "p99 ms", "÷ raw ORT"], rows)


def _big_row(label: str, cell: Cell | None, raw: Calls) -> list[str]:
    if cell is None:
        return [label, "—", "—", "—", "—"]
    return [
        label,
        f"{cell.windows_per_s:,.0f}{_flags(cell)}",
        f"{cell.result.percentile_ms(50):.1f}",
        f"{cell.result.percentile_ms(99):.1f}",
        f"{cell.windows_per_s / raw.windows_per_s:.2f}",
    ]


def cpu_table(report: Report) -> list[str]:
    conc = report.config["concurrency"]
    big = (report.config["big_concurrency"], report.config["big_series"])
    v2 = any(run.server.takes_v2_binary for run in report.runs)  # a column only when a server has the cell
    rows = []
    for run in report.runs:
        cells = [report.cell(run.server.key, c) for c in conc] + [report.cell(run.server.key, *big)]
        if v2:
            cells.append(report.cell(run.server.key, *big, V2_BINARY))
        sizes = [c.answer_bytes for c in cells[:1] if c is not None and c.answer_bytes is not None]
        rows.append(
            [
                run.server.key,
                *(_cpu(c) for c in cells),
                f"{sizes[0]:,.0f}" if sizes else "—",
                str(run.exit_code),
            ]
        )
    header = ["server", *(f"c={c}" for c in conc), f"{big[1]} series, c={big[0]}"]
    if v2:
        header.append(f"{big[1]} series, c={big[0]}, OIP v2 binary")
    return _table([*header, "answer bytes (1 series)", "exit code"], rows)


def _cpu(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    server, client = cell.cpu_ms(cell.result.server_cpu_s), cell.cpu_ms(cell.result.client_cpu_s)
    return f"{server:.2f} ({client:.2f})" if server is not None and client is not None else "—"


def _rps_ratio(a: Cell, b: Cell) -> float:
    return a.result.throughput / b.result.throughput


def _p99_ratio(a: Cell, b: Cell) -> float:
    return a.result.percentile_ms(99) / b.result.percentile_ms(99)


def _p50_gap_ms(a: Cell, b: Cell) -> float:
    return a.result.percentile_ms(50) - b.result.percentile_ms(50)


def targets(report: Report) -> list[Target]:
    """The issue's targets, each from two cells of this run (or one and raw ORT)."""
    conc = report.config["concurrency"]
    svc = {c: report.cell("service", c) for c in conc}
    out = []
    for c in conc:
        pairs = report.round_cells(c)
        goal = f"≥ {MIN_THROUGHPUT_VS_MINIMAL}"
        what = f"service / minimal req/s, c={c}"
        out.append(median_target(what, goal, pairs, _rps_ratio, at_least(MIN_THROUGHPUT_VS_MINIMAL)))
        goal = f"≤ {MAX_P99_VS_MINIMAL}"
        what = f"service p99 / minimal p99, c={c}"
        out.append(median_target(what, goal, pairs, _p99_ratio, at_most(MAX_P99_VS_MINIMAL)))
    if 1 in conc:
        goal = f"≤ {MAX_P50_OVER_MINIMAL_MS} ms"
        what = "service p50 − minimal p50, c=1 (ms)"
        pairs = report.round_cells(1)
        out.append(median_target(what, goal, pairs, _p50_gap_ms, at_most(MAX_P50_OVER_MINIMAL_MS)))
    for peer in ("litserve", "naive"):
        for c in conc:
            pair = [svc[c], report.cell(peer, c)]
            out.append(target(f"service / {peer} req/s, c={c}", "> 1", pair, _rps_ratio, above(1)))
    raw = report.raw_big.windows_per_s
    big = (report.config["big_concurrency"], report.config["big_series"])
    goal = f"≥ {MIN_BIG_VS_RAW}"
    for protocol, how in ((V1, ""), (V2_BINARY, " (OIP v2 binary)")):
        what = f"service{how} windows/s ÷ raw ORT batch {report.raw_big.batch}"
        cell = report.cell("service", *big, protocol)
        out.append(target(what, goal, [cell], lambda c: c.windows_per_s / raw, at_least(MIN_BIG_VS_RAW)))
    return out


def format_report(report: Report) -> str:
    cfg = report.config
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Serving benchmark ({when})",
        "",
        f"Model {MODEL_DIR.relative_to(REPO)}, device {cfg['device']}, {os.cpu_count()} CPUs; "
        f"{cfg['requests']} requests per cell after {cfg['warmup']} warm-up, one 96×7 window each; "
        f"load average before {report.load_before[0]:.2f}, after {report.load_after[0]:.2f}; "
        f"run took {report.duration_s:.0f} s. The tables show the first round; the targets against the "
        f"minimal server are the median of {1 + len(report.rounds)} round(s), each round's value in "
        "parentheses.",
        "",
        *throughput_table(report),
        "",
        *big_table(report),
        "",
        "Server CPU ms per request, whole process tree (the load generator's in parentheses):",
        "",
        *cpu_table(report),
        "",
        *_table(["target", "measured", "goal", ""], [t.row() for t in targets(report)]),
    ]
    for run in report.runs:
        if run.error or run.skipped:
            lines += ["", f"{run.server.key}: {run.error or run.skipped}"]
        for cell in run.cells:
            how = "" if cell.protocol == V1 else f" {cell.protocol}"
            lines += [f"{cell.server}{how} c={cell.concurrency}: {s}" for s in cell.result.error_samples]
    return "\n".join(lines)


def report_json(report: Report) -> dict[str, Any]:
    return {
        "config": report.config,
        "load_average_before": report.load_before,
        "load_average_after": report.load_after,
        "duration_s": report.duration_s,
        "raw_ort": [report.raw_small.summary(), report.raw_big.summary()],
        "servers": [r.summary() for r in report.runs],
        "rounds": [{"minimal": a.summary(), "service": b.summary()} for a, b in report.rounds],
        "targets": [t.summary() for t in targets(report)],
        "passed": report.ok,
    }
