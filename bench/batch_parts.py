"""bench/batch.py's input: synthetic series built from ETTh1, written as long Parquet parts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.harness import REPO

__all__ = ["CHANNELS", "synthetic_parts"]

CHANNELS = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]


def synthetic_parts(
    folder: Path, series: int, parts: int, length: int, seed: int = 0, dtype: type = np.float64
) -> int:
    """`series` synthetic long series in `parts` Parquet files, each holding whole series; a part already
    in `folder` is kept (its series are drawn from a seed of its own, so a rerun draws the same ones).
    Returns the number of parts written."""
    wide = pd.read_csv(REPO / "data" / "ETT" / "ETTh1.csv", parse_dates=["date"])
    values = wide[CHANNELS].to_numpy(np.float64)
    stamps = pa.array(wide["date"].to_numpy("datetime64[us]"))
    per_part = -(-series // parts)
    written = 0
    for p in range(parts):
        n = min(per_part, series - p * per_part)
        path = folder / f"part-{p:04d}.parquet"
        if n <= 0:
            break
        if path.exists():
            continue
        rng = np.random.default_rng([seed, p])
        lengths = rng.integers(length + 8, length + 65, n)
        ends = rng.integers(lengths, len(values))
        scale = rng.uniform(0.5, 2.0, (n, len(CHANNELS)))
        shift = rng.normal(0.0, 2.0, (n, len(CHANNELS)))
        owner = np.repeat(np.arange(n), lengths)
        rows = np.arange(len(owner)) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # 0..k-1 per series
        rows += np.repeat(ends - lengths, lengths)
        x = (values[rows] * scale[owner] + shift[owner]).astype(dtype, copy=False)
        names = pa.array([f"p{p:04d}-{i:06d}" for i in range(n)])
        table = {"unique_id": names.take(pa.array(owner)), "ds": stamps.take(pa.array(rows))}
        table |= {c: x[:, j] for j, c in enumerate(CHANNELS)}
        pq.write_table(pa.table(table), folder / f".{path.name}")
        (folder / f".{path.name}").rename(path)  # a part that exists is whole
        written += 1
    return written
