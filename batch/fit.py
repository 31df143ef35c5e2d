"""The global REM read-out (export/global_models/model.py) fitted on Ray Data: each block of series adds its
windows to its own normal equations (`export.global_models.model.accumulate`, the single-process fit's own
code), the blocks' Gram matrices, cross products and sums are added on the driver, and the sum is solved once
(`app.artifacts.readout.NormalEquations.solve`). Only the (F+1)² + (F+1)·H numbers of each block
travel, so the table is never in one place; the answer equals the single-process fit's up to the
order of the sums (tests/batch/test_fit.py: within 1e-6 relative on M3 monthly). IRLS passes
(`cfg.irls`) each read the dataset again with the previous pass's solution.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.artifacts.readout import NormalEquations, solve_passes
from batch import io
from export.global_models.config import PanelConfig, rem_kernels
from export.global_models.model import GlobalModel, accumulate


def block_equations(
    series: Sequence[np.ndarray], cfg: PanelConfig, length: int, previous: np.ndarray | None
) -> dict[str, np.ndarray]:
    """One block's normal equations as arrays with a leading axis of one (none when no series of the
    block has a window)."""
    kernels = rem_kernels(cfg.spec, cfg.period, length)
    eq = accumulate(series, cfg, length, kernels, previous)
    if eq is None:
        return {
            "gram": np.empty((0, 0, 0)),
            "cross": np.empty((0, 0, 0)),
            "t_sq": np.empty(0),
            "count": np.empty(0),
        }
    return {
        "gram": eq.gram[None],
        "cross": eq.cross[None],
        "t_sq": np.array([eq.t_sq]),
        "count": np.array([eq.count], np.int64),
    }


def _block(
    batch: dict[str, np.ndarray], cfg: PanelConfig, length: int, previous: Any
) -> dict[str, np.ndarray]:
    series = [np.asarray(v, dtype=np.float64) for v in batch["y"]]
    return block_equations(series, cfg, length, previous)


def dataset_equations(
    dataset: Any, cfg: PanelConfig, input_length: int, previous: np.ndarray | None
) -> NormalEquations | None:
    """One pass over `dataset`: every block's normal equations, summed on the driver (None where no
    block has a window)."""
    per_block = dataset.map_batches(
        _block,
        fn_kwargs={"cfg": cfg, "length": input_length, "previous": previous},
        batch_size=None,  # the whole block: its equations, once
        batch_format="numpy",
    )
    total: NormalEquations | None = None
    for row in per_block.iter_rows():
        gram, cross = np.asarray(row["gram"]), np.asarray(row["cross"])
        if total is None:
            total = NormalEquations(gram.shape[0] - 1, cross.shape[1])
        total.gram += gram
        total.cross += cross
        total.t_sq += float(row["t_sq"])
        total.count += int(row["count"])
    return total


def _lowest(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A block's lowest observed value (inf for none): `never_below_zero` over a dataset."""
    lows = [np.nanmin(np.asarray(v, np.float64), initial=np.inf) for v in batch["y"]]
    return {"low": np.array([min(lows, default=np.inf)])}


def fit_dataset(dataset: Any, cfg: PanelConfig, input_length: int) -> GlobalModel:
    """`dataset`: a Ray Dataset with a column `y`, one series (its values, oldest first) a row. Where
    `cfg.mirror` is None it is decided as `train_global` decides it: no value below zero, a window below
    zero read mirrored (one more pass over the data, for the lowest value)."""
    start = time.perf_counter()
    if cfg.mirror is None:
        lows = dataset.map_batches(_lowest, batch_size=None, batch_format="numpy")
        low = min((float(row["low"]) for row in lows.iter_rows()), default=np.inf)
        cfg = dataclasses.replace(cfg, mirror=not low < 0)
    sol = solve_passes(
        cfg.fit_settings, lambda previous: dataset_equations(dataset, cfg, input_length, previous)
    )
    return GlobalModel(cfg, input_length, sol, fit_seconds=time.perf_counter() - start)


def series_dataset(series: Sequence[np.ndarray], blocks: int) -> Any:
    """In-memory series as a Ray Dataset of `blocks` blocks (tests, small tables)."""
    import ray.data

    return ray.data.from_items([{"y": np.asarray(v, np.float64)} for v in series], override_num_blocks=blocks)


def table_dataset(input_uri: str, id_col: str = "unique_id", time_col: str = "ds", target: str = "y") -> Any:
    """A long table's parts (each holding whole series) as a Ray Dataset of series, one block a part:
    read by the workers, never by the driver."""
    import ray.data

    parts = io.list_parts(input_uri)

    def series_of(row: dict[str, Any]) -> list[dict[str, Any]]:
        table = io.read_part(parts.fs, parts.path(row["part"]))
        table = table.sort_by([(id_col, "ascending"), (time_col, "ascending")])
        ids = table[id_col].to_numpy(zero_copy_only=False)
        values = table[target].to_numpy(zero_copy_only=False).astype(np.float64)
        cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        return [{"y": v} for v in np.split(values, cuts)]

    items = [{"part": r} for r in parts.relative]
    return ray.data.from_items(items, override_num_blocks=len(items)).flat_map(series_of)
