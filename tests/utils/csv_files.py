"""CSV files for the exporter's reader tests (tests/export/test_data*.py): written rows, a regular
synthetic series, and a few good rows of the refusal tests' header."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def synthetic_csv(
    tmp_path: Path, n: int, freq: str = "1h", name: str = "data.csv", columns: tuple[str, ...] = ("a", "OT")
) -> Path:
    """A regular series of ``n`` rows with distinct, deterministic values per column."""
    stamps = pd.date_range("2020-01-01", periods=n, freq=freq)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({c: rng.normal(loc=i, scale=i + 1, size=n) for i, c in enumerate(columns)})
    frame.insert(0, "date", stamps.strftime("%Y-%m-%d %H:%M:%S"))
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def good_rows(n: int = 5) -> list[str]:
    return [f"2016-07-01 {h:02d}:00:00,{h}.5,{10 + h}" for h in range(n)]


def hourly(n: int, start: str = "2021-01-01") -> list[pd.Timestamp]:
    """`n` hourly stamps from `start`."""
    return list(pd.date_range(start, periods=n, freq="h"))
