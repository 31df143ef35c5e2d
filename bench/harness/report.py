"""Reports: the one table helper, targets judged by code, and the raw results as JSON.

- `format_table`: plain text (right-aligned columns, the first left-aligned, a rule under the header)
  or, with `markdown=True`, a Markdown table to paste into BENCHMARKS.md;
- `Target`: a measured value, its goal, and whether it is met (None: a cell behind it is missing); built
  by `target` from cells and two functions (the value, the verdict) or by `median_target` over rounds;
- `write_json`: the raw results, indented, for `--json PATH`.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar


def format_table(
    header: Sequence[object], rows: Sequence[Sequence[object]], *, markdown: bool = False
) -> str:
    """Plain text: right-aligned columns, the first left-aligned, a rule under the header. Markdown: one
    `| a | b |` line per row under a `| --- |` rule."""
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    if markdown:
        rule = ["---"] * len(header)
        return "\n".join("| " + " | ".join(r) + " |" for r in [cells[0], rule, *cells[1:]])
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )

    return "\n".join([line(cells[0]), "-" * len(line(cells[0])), *(line(r) for r in cells[1:])])


def verdict(met: bool) -> str:
    """How a plain-text report words a target's verdict."""
    return "met" if met else "NOT met"


@dataclass(frozen=True)
class Target:
    what: str
    value: float | None  # None: a cell is missing (a server failed, was skipped, or was not run)
    goal: str
    met: bool | None
    shaky: bool = False  # a cell behind it had errors or was cut by the time limit
    rounds: tuple[float, ...] = ()  # each round's value, when `value` is their median

    def row(self) -> list[str]:
        """A Markdown table row: what, measured (each round's value beside it), goal, verdict."""
        if self.value is None or self.met is None:
            return [self.what, "—", self.goal, "no data"]
        judged = "met" if self.met else "**missed**"
        measured = f"{self.value:.2f}"
        if len(self.rounds) > 1:
            measured += " (" + ", ".join(f"{v:.2f}" for v in self.rounds) + ")"
        return [self.what, measured, self.goal, judged + (" (errors or cut)" if self.shaky else "")]

    def summary(self) -> dict[str, Any]:
        return asdict(self) | {"rounds": list(self.rounds)}


class Judged(Protocol):
    """A cell a target is computed from: whether it ran cleanly and whole."""

    @property
    def shaky(self) -> bool: ...


C = TypeVar("C", bound=Judged)


def target(
    what: str,
    goal: str,
    cells: Sequence[C | None],
    value: Callable[..., float],
    ok: Callable[[float], bool],
) -> Target:
    """`value(*cells)` judged by `ok`; no data when a cell is missing."""
    present = [c for c in cells if c is not None]
    if len(present) < len(cells):
        return Target(what, None, goal, None)
    v = value(*present)
    return Target(what, v, goal, ok(v), any(c.shaky for c in present))


def median_target(
    what: str,
    goal: str,
    pairs: Sequence[tuple[C | None, C | None]],
    value: Callable[[C, C], float],
    ok: Callable[[float], bool],
) -> Target:
    """The median over rounds of `value` on each round's pair of cells, judged by `ok`."""
    complete = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not complete or len(complete) < len(pairs):
        return Target(what, None, goal, None)
    each = tuple(value(a, b) for a, b in complete)
    v = statistics.median(each)
    shaky = any(c.shaky for pair in complete for c in pair)
    return Target(what, v, goal, ok(v), shaky, each)


def at_least(bound: float) -> Callable[[float], bool]:
    return lambda v: v >= bound


def at_most(bound: float) -> Callable[[float], bool]:
    return lambda v: v <= bound


def above(bound: float) -> Callable[[float], bool]:
    return lambda v: v > bound


def write_json(path: Path, data: object) -> None:
    """A benchmark's report at `path` (its folder made if need be), indented, ending with a newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
