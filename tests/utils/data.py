"""Small data for tests: slices of the bundled ETTh1 file, written to a test's temporary folder."""

from __future__ import annotations

from pathlib import Path

from export.data import ETT_DIR


def ettd_slice(path: Path, rows: int) -> Path:
    """The header and the first `rows` rows of ETTh1 (a temporary working file, never redistributed)."""
    lines = (ETT_DIR / "ETTh1.csv").read_text().splitlines(keepends=True)
    path.write_text("".join(lines[: rows + 1]))
    return path
