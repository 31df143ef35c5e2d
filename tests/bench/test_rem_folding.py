"""bench.rem_folding: the smoke form (two tiny input lengths), and the recompute graph shown to really
recompute. No timing is asserted."""

from __future__ import annotations

import pytest

from bench import rem_folding
from export.onnx import TOLERANCE
from tests.bench.tables import table_rows


def test_smoke_run_times_both_graphs_on_the_same_forecasts(capsys: pytest.CaptureFixture[str]) -> None:
    rem_folding.main(["--smoke"])
    out = capsys.readouterr().out
    rows = table_rows(out, "L")
    assert [(r["L"], r["batch"]) for r in rows] == [("16", "1"), ("16", "4"), ("32", "1"), ("32", "4")], out
    for r in rows:
        assert float(r["max|diff|"]) <= TOLERANCE, out  # the two graphs compute the same forecasts
        assert float(r["folded ms"]) > 0 and float(r["recompute ms"]) > 0, out
        assert float(r["recompute/folded"]) > 0 and 1 <= int(r["rounds"]) <= 3, out
    # The folded graph holds no REM arithmetic; the recompute graph does (the bench checks it, and says).
    for length in (16, 32):
        line = next(x for x in out.splitlines() if x.strip().startswith(f"L={length}:"))
        folded, recompute = line.split(":", 1)[1].split("|")
        assert folded.strip() == "none" and recompute.strip() != "none", line


def test_rem_parameters_are_only_the_rem_ones() -> None:
    assert rem_folding.is_rem_parameter("layers.0.attn.rem.groups.0.eta")
    assert rem_folding.is_rem_parameter("layers.0.attn.mu")
    assert not rem_folding.is_rem_parameter("layers.0.attn.qkv.weight")


def test_attention_over_the_memory_cap_is_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    rem_folding.main(["--smoke", "--lengths", "16", "--batches", "1", "--max-attention-mib", "0"])
    rows = table_rows(capsys.readouterr().out, "L")
    assert len(rows) == 1 and rows[0]["folded ms"] == "skipped"
