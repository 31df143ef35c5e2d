"""Reading the plain-text tables the benches print (`bench.harness.report.format_table`)."""

from __future__ import annotations

import re

_GAP = re.compile(r" {2,}")  # columns are two or more spaces apart; a header may hold one ("torch ms")


def table_rows(out: str, first_column: str) -> list[dict[str, str]]:
    """The rows of the first table in `out` whose header starts with `first_column`, as header -> cell.

    A row ends the table when its first cell is not a number. A skipped row ("skipped" and blanks)
    has fewer cells: the ones it has."""
    lines = [line.strip() for line in out.splitlines()]
    start = next(
        i
        for i, line in enumerate(lines[:-1])
        if line.split()[:1] == [first_column] and lines[i + 1] and set(lines[i + 1]) == {"-"}
    )
    header = _GAP.split(lines[start])
    rows = []
    for line in lines[start + 2 :]:
        cells = _GAP.split(line) if line else []
        if not cells or not cells[0].isdigit():
            break
        rows.append(dict(zip(header, cells, strict=False)))
    return rows
