"""bench.zero_shot_served's smoke run (issue 47): the shipped pretrained models served by `python -m app`,
scored on slices of M3 and Tourism monthly's hold-outs and of the held-back M1's quarterly and yearly
ones (each set by the model of its cycle), the 80% coverage split by history length."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.zero_shot_served import main


@pytest.mark.slow  # starts a service process
def test_smoke_run_scores_each_set_by_the_served_model_of_its_cycle(tmp_path: Path) -> None:
    out = tmp_path / "served.json"
    assert main(["--limit", "6", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["sets"]) == {"M3 monthly", "Tourism monthly"}
    sets = ["--data", "M1:quarterly", "--data", "M1:yearly"]
    assert main(["--limit", "6", *sets, "--json", str(tmp_path / "m1.json")]) == 0
    report["sets"] |= json.loads((tmp_path / "m1.json").read_text())["sets"]
    models = {
        "monthly": "pretrained-monthly",
        "quarterly": "pretrained-quarterly",
        "yearly": "pretrained-yearly",
    }
    for name, part in report["sets"].items():
        row, groups = part["row"], part["coverage_by_history"]
        model = models[name.split()[-1]]
        assert part["model"] == model and row["model"] == f"{model} (served)"
        assert row["series"] == part["series"] == 6
        assert math.isfinite(row["mase"]) and row["mase"] > 0 and row["smape"] > 0
        assert sum(g["series"] for g in groups.values()) == 6
        weighted = sum(g["series"] * g["coverage_80"] for g in groups.values()) / 6
        assert 0.0 <= row["coverage_80"] <= 1.0 and math.isclose(weighted, row["coverage_80"])
