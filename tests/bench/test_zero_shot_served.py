"""bench.zero_shot_served's smoke run (issue 47): the shipped pretrained-monthly served by `python -m app`,
scored on a slice of M3 and Tourism monthly's hold-outs, the 80% coverage split by history length."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.zero_shot_served import main


@pytest.mark.slow  # starts a service process
def test_smoke_run_scores_the_served_model_on_both_sets(tmp_path: Path) -> None:
    out = tmp_path / "served.json"
    assert main(["--limit", "6", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["model"] == "pretrained-monthly"
    assert set(report["sets"]) == {"M3 monthly", "Tourism monthly"}
    for part in report["sets"].values():
        row, groups = part["row"], part["coverage_by_history"]
        assert row["series"] == part["series"] == 6 and row["model"] == "pretrained-monthly (served)"
        assert math.isfinite(row["mase"]) and row["mase"] > 0 and row["smape"] > 0
        assert sum(g["series"] for g in groups.values()) == 6
        weighted = sum(g["series"] * g["coverage_80"] for g in groups.values()) / 6
        assert 0.0 <= row["coverage_80"] <= 1.0 and math.isclose(weighted, row["coverage_80"])
