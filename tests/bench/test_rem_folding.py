"""bench.rem_folding: the smoke form (a tiny input length), and the recompute graph shown to really
recompute. No timing is asserted."""

from __future__ import annotations

import pytest

from bench import rem_folding
from export.onnx import TOLERANCE
from tests.bench.tables import table_rows


def test_smoke_run_times_both_graphs_on_the_same_forecasts(capsys: pytest.CaptureFixture[str]) -> None:
    # A cap between batch 1's attention matrix and batch 4's: the second is skipped, not run (one export
    # serves both checks; each export takes most of the run).
    rem_folding.main(["--smoke", "--max-attention-mib", "0.05"])
    out = capsys.readouterr().out
    rows = table_rows(out, "L")
    assert [(r["L"], r["batch"]) for r in rows] == [("16", "1"), ("16", "4")], out
    measured, skipped = rows
    assert float(measured["max|diff|"]) <= TOLERANCE, out  # the two graphs compute the same forecasts
    assert float(measured["folded ms"]) > 0 and float(measured["recompute ms"]) > 0, out
    assert float(measured["recompute/folded"]) > 0 and 1 <= int(measured["rounds"]) <= 3, out
    assert float(measured["attn MiB"]) <= 0.05, out
    assert skipped["folded ms"] == "skipped", out
    # The folded graph holds no REM arithmetic; the recompute graph does (the bench checks it, and says).
    line = next(x for x in out.splitlines() if x.strip().startswith("L=16:"))
    folded, recompute = line.split(":", 1)[1].split("|")
    assert folded.strip() == "none" and recompute.strip() != "none", line


def test_rem_parameters_are_only_the_rem_ones() -> None:
    assert rem_folding.is_rem_parameter("layers.0.attn.rem.groups.0.eta")
    assert rem_folding.is_rem_parameter("layers.0.attn.mu")
    assert not rem_folding.is_rem_parameter("layers.0.attn.qkv.weight")
