"""docs/results.md's prediction-interval sections (export/results.py puts the page together): the
interval targets of the shipped model (`shipped_interval_targets`) and every version's evaluation
written by `python -m export.conformal` (`interval_section`).
"""

from __future__ import annotations

from export.reports import IntervalEvaluation

__all__ = ["EXTRA_VARIANTS", "interval_section", "shipped_interval_targets"]

TARGET_LEVELS = (80, 90, 95)  # the coverage target: within ±3 points of nominal at these
OVERALL_BAND, CHANNEL_BAND = 3.0, 6.0
EXTRA_VARIANTS = {
    "served": "what the version serves (its manifest's widths)",
    "signed": "signed residuals, per step: lower and upper quantiles of y − ŷ (not a candidate)",
    "pooled": "naive: one width per channel pooled over the steps (not a candidate)",
}


def shipped_interval_targets(reports: list[IntervalEvaluation], model: str = "etth1-rsa") -> list[str]:
    """Issue 24's interval targets on the latest version of `model` evaluated, against the version
    before it ("today's" interval score)."""
    mine = sorted((r for r in reports if r.model == model), key=lambda r: r.version)
    if not mine:
        return []
    new, old = mine[-1], (mine[-2] if len(mine) > 1 else None)
    served = new.rows("served")
    at = [served[v] for v in TARGET_LEVELS if v in served]
    off = {row.level: 100 * row.coverage - row.level for row in at}
    ch = {row.level: row.channel_off for row in at}
    name = f"{model} v{new.version}"
    lines = [
        f"- Intervals of the shipped model ({name}), coverage within ±{OVERALL_BAND:g} points of nominal at "
        "80/90/95% on test: "
        + ", ".join(f"{v:g}%: {off[v]:+.1f}" for v in off)
        + f" — {'met' if all(abs(d) <= OVERALL_BAND for d in off.values()) else '**missed**'}.",
        f"- … and within ±{CHANNEL_BAND:g} points on every channel: worst channel "
        + ", ".join(f"{v:g}%: {d:.1f}" for v, d in ch.items())
        + f" — {'met' if all(d <= CHANNEL_BAND for d in ch.values()) else '**missed**'}.",
    ]
    if old is not None:
        before = old.rows("served")
        pairs = [(v, served[v].winkler, before[v].winkler) for v in served if v in before]
        lines.append(
            f"- … with the interval score no worse than v{old.version}'s: "
            + ", ".join(f"{v:g}%: {a:.3f} against {b:.3f}" for v, a, b in pairs)
            + f" — {'met' if all(a <= b for _, a, b in pairs) else '**missed**'}."
        )
    return lines


def interval_section(reports: list[IntervalEvaluation]) -> list[str]:
    """The prediction-interval evaluations (export.conformal's reports): the served intervals on every
    test window, the candidate methods on validation-internal splits (what chose the served one) and on
    test (shown, never used to choose), per request horizon and per channel."""
    lines: list[str] = []
    if len(reports) > 1:
        levels = [row.level for row in reports[0].variants["served"]]
        lines += [
            "## Prediction intervals: coverage on the test split, every model evaluated",
            "",
            "Each version's served intervals (split conformal per step and channel, calibrated on its",
            "validation windows by the method named), on every test window; the sections below give each",
            "in full. Max channel: the largest |coverage − nominal| over the channels at 80/90/95%.",
            "",
            "| model | L | H | method | "
            + " | ".join(f"coverage {v:g}%" for v in levels)
            + " | max channel 80/90/95 | width 90% | score 90% |",
            "|---|---|---|---|" + "---|" * (len(levels) + 3),
        ]
        for r in reports:
            by_level = r.rows("served")
            cov = " | ".join(f"{100 * by_level[v].coverage:.1f}%" if v in by_level else "—" for v in levels)
            chan = " / ".join(f"{by_level[v].channel_off:.1f}" for v in TARGET_LEVELS if v in by_level)
            at90 = by_level.get(90.0)
            width, score = (f"{at90.width:.3f}", f"{at90.winkler:.3f}") if at90 else ("—", "—")
            lines.append(
                f"| {r.model} v{r.version} | {r.input_length} | {r.horizon} |"
                f" {r.served_method} | {cov} | {chan} | {width} | {score} |"
            )
        lines.append("")
    for r in reports:
        lines += _version_section(r)
    return lines


def _version_section(r: IntervalEvaluation) -> list[str]:
    """One version's evaluation: its served intervals per level against the target, the methods on
    validation-internal splits and on test, by request horizon and per channel, and its bands' picture."""
    lines: list[str] = []
    name = f"{r.model} v{r.version}"
    method = r.served_method
    lines += [
        f"## Prediction intervals ({name}, {r.dataset}, H = {r.horizon})",
        "",
        f"Split conformal per horizon step and channel (docs/intervals.md), method `{method}`, calibrated"
        f" on the {r.calibration['windows']} windows of the validation split, evaluated on all "
        f"{r.test.windows} test windows, every step and channel. Width and interval (Winkler) "
        "score in units of each channel's training std (lower is better); coverage: share of true "
        f"values inside. Rerun: `{r.command}`.",
        "",
        "| level | coverage | off nominal | channels: lowest / highest | mean width | interval score |",
        "|---|---|---|---|---|---|",
    ]
    served = r.variants["served"]
    for row in served:
        off = 100 * row.coverage - row.level
        lo, hi = min(row.coverage_by_channel), max(row.coverage_by_channel)
        lines.append(
            f"| {row.level:g}% | {100 * row.coverage:.1f}% | {off:+.1f} | {100 * lo:.1f}% / "
            f"{100 * hi:.1f}% | {row.width:.3f} | {row.winkler:.3f} |"
        )
    targeted = [row for row in served if row.level in TARGET_LEVELS]
    off_by_level = {row.level: 100 * row.coverage - row.level for row in targeted}
    within = [f"{v:g}%" for v, d in off_by_level.items() if abs(d) <= OVERALL_BAND]
    outside = [f"{v:g}% ({d:+.1f})" for v, d in off_by_level.items() if abs(d) > OVERALL_BAND]
    lines += [
        "",
        "Target: coverage within ±3 points of nominal at 80/90/95%. "
        f"Met at: {', '.join(within) or 'none'}; missed at: {', '.join(outside) or 'none'}.",
        "",
    ]
    lines += _methods_tables(r)
    horizons = list(served[0].by_request_horizon)
    lines += [
        "",
        "Served intervals by request horizon (a request of horizon h gets the first h steps' widths):",
        "",
        "| level |" + "".join(f" h = {h}: coverage / width |" for h in horizons),
        "|---|" + "---|" * len(horizons),
    ]
    for row in served:
        by_h = row.by_request_horizon
        cells = "".join(f" {100 * by_h[h].coverage:.1f}% / {by_h[h].width:.3f} |" for h in horizons)
        lines.append(f"| {row.level:g}% |{cells}")
    lines += [
        "",
        "Coverage per channel ("
        + ", ".join(r.channels)
        + "): "
        + "; ".join(
            f"{row.level:g}%: " + " ".join(f"{100 * c:.1f}" for c in row.coverage_by_channel)
            for row in served
        )
        + ".",
        "",
        f"![{r.plot.channel} test windows {r.plot.windows} with 80% and 95% bands]"
        f"(../{r.folder}/{r.plot.file})",
        "",
    ]
    return lines


def _methods_tables(r: IntervalEvaluation) -> list[str]:
    """The methods on validation-internal splits (what chose the served one), then every method
    calibrated on the whole validation split and scored on test (shown, never used to choose)."""
    method = r.served_method
    lines: list[str] = []
    if r.selection:
        splits = r.selection_splits
        lines += [
            "The methods on validation-internal splits (" + ", ".join(splits) + "; each calibrated on the"
            " validation windows before the part it is scored on): mean points outside the target bands"
            " (±3 overall, ±6 per channel, at 80/90/95%), mean |coverage − nominal|, the worst channel,"
            " and the interval score at 90%. The rule (export.conformal.select_method) serves the"
            " smallest distance outside the bands, ties within 0.05 broken by the score.",
            "",
            "| method | outside bands | coverage error | worst channel | score 90% |",
            "|---|---|---|---|---|",
        ]
        for m, v in r.selection.items():
            mark = " (served)" if m == method else ""
            lines.append(
                f"| {m}{mark} | {v.outside_bands:.2f} | {v.coverage_error:.2f} |"
                f" {v.channel_error_max:.1f} | {v.score90:.3f} |"
            )
        lines.append("")
    lines += [
        "Every method calibrated on the whole validation split and scored on test (shown, never used to"
        " choose): coverage, worst channel's |coverage − nominal| and interval score at 80 / 90 / 95%.",
        "",
        "| method | coverage | worst channel | interval score | what it is |",
        "|---|---|---|---|---|",
    ]
    described = {**r.methods, **EXTRA_VARIANTS}
    for variant in r.variants:
        rows = r.rows(variant)
        at = [rows[v] for v in TARGET_LEVELS if v in rows]
        lines.append(
            f"| {variant} | "
            + " / ".join(f"{100 * x.coverage:.1f}%" for x in at)
            + " | "
            + " / ".join(f"{x.channel_off:.1f}" for x in at)
            + " | "
            + " / ".join(f"{x.winkler:.3f}" for x in at)
            + f" | {described.get(variant, '')} |"
        )
    return lines
