"""Published numbers the results page compares against: results/anchors.yaml, each with its source and
protocol. Only bug-free anchors (every test window, `drop_last: false`) are ranked; the others are
listed apart."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Anchor", "anchor_section", "best_bug_free", "load_anchors"]

HORIZONS = (96, 192, 336, 720)


@dataclass(frozen=True)
class Anchor:
    model: str
    paper: str
    venue: str | None
    source: str
    dataset: str
    input_length: Any
    drop_last: bool
    input_length_choice: str
    mse: dict[int, float] = field(default_factory=dict)
    mean_reported: float | None = None

    @property
    def bug_free(self) -> bool:
        return not self.drop_last

    @property
    def mean(self) -> float | None:
        """The mean over the four horizons: as reported, or of the four numbers when all are given."""
        if self.mean_reported is not None:
            return self.mean_reported
        if all(h in self.mse for h in HORIZONS):
            return statistics.fmean(self.mse[h] for h in HORIZONS)
        return None


def load_anchors(path: Path) -> list[Anchor]:
    """Every anchor of the file; a missing file has none."""
    if not path.exists():
        return []
    raw = yaml.safe_load(path.read_text()) or {}
    out = []
    for a in raw.get("anchors", []):
        a = dict(a)
        mse = {int(h): float(v) for h, v in (a.pop("mse", None) or {}).items()}
        mean = a.pop("mean", None)
        out.append(Anchor(**a, mse=mse, mean_reported=None if mean is None else float(mean)))
    return out


def best_bug_free(
    anchors: list[Anchor], dataset: str
) -> tuple[dict[int, tuple[float, str]], tuple[float, str] | None]:
    """Per horizon the lowest bug-free MSE and whose it is; and the lowest bug-free mean."""
    ranked = [a for a in anchors if a.bug_free and a.dataset == dataset]
    per_h: dict[int, tuple[float, str]] = {}
    for h in HORIZONS:
        have = [(a.mse[h], a.model) for a in ranked if h in a.mse]
        if have:
            per_h[h] = min(have)
    means = [(a.mean, a.model) for a in ranked if a.mean is not None]
    return per_h, (min(means) if means else None)


def _cell(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def anchor_section(anchors: list[Anchor], ours: dict[str, dict[int, float]], label: str) -> list[str]:
    """Our mean MSE per data set and horizon (`ours`) against the anchors: the bug-free ones ranked with
    ours, the others apart, then each anchor's source and protocol."""
    if not anchors:
        return []
    lines = [
        "## Against published numbers",
        "",
        "From `results/anchors.yaml` (not rerun here), multivariate, the standard split, MSE on the scaled",
        "data. *Bug-free*: the paper's test loader kept every test window (`drop_last` false), as ours",
        "does; only those are ranked. Per horizon, the row's best bug-free number is in bold.",
        "",
    ]
    for data in sorted({a.dataset for a in anchors}):
        free = [a for a in anchors if a.dataset == data and a.bug_free]
        bugged = [a for a in anchors if a.dataset == data and not a.bug_free]
        mine = ours.get(data, {})
        per_h, best_mean = best_bug_free(anchors, data)
        lines += [f"### {data}", "", f"| horizon | ours ({label}) | " + " | ".join(a.model for a in free)]
        lines[-1] += " | ours − best bug-free |"
        lines.append("|---|---|" + "---|" * len(free) + "---|")
        rows: list[int | str] = [*HORIZONS, "mean"]
        for h in rows:
            if isinstance(h, str):  # "mean"
                our = statistics.fmean(mine.values()) if all(x in mine for x in HORIZONS) else None
                theirs = [a.mean for a in free]
                best = best_mean[0] if best_mean else None
            else:
                our, theirs = mine.get(h), [a.mse.get(h) for a in free]
                best = per_h[h][0] if h in per_h else None
            cells = [("**" + _cell(v) + "**") if v is not None and v == best else _cell(v) for v in theirs]
            gap = f"{our - best:+.4f}" if our is not None and best is not None else "—"
            lines.append(
                f"| {h} | {'—' if our is None else f'{our:.4f}'} | " + " | ".join(cells) + f" | {gap} |"
            )
        if bugged:
            lines += [
                "",
                "Listed apart, not ranked (the test loader dropped the last batch): "
                + "; ".join(
                    f"{a.model} "
                    + " / ".join(_cell(a.mse.get(h)) for h in HORIZONS)
                    + (f", mean {a.mean:.3f}" if a.mean is not None else "")
                    for a in bugged
                )
                + " (96 / 192 / 336 / 720).",
            ]
        lines.append("")
    lines += ["Sources and protocols:", ""]
    for a in anchors:
        lines.append(
            f"- **{a.model}** ({a.dataset}; {a.paper}): input length {a.input_length or 'not recorded'}, "
            f"L chosen: {a.input_length_choice}; drop_last: {'yes (bug)' if a.drop_last else 'no'}. "
            f"Source: {a.source}."
        )
    lines.append("")
    return lines
