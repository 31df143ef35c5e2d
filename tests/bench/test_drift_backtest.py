"""bench.drift_backtest's smoke run (issues 43 and 47): the drift rule set one origin earlier and scored
on the last, for each rule, on a slice of M3 other's histories."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.drift_backtest import LEVELS, RULES, backtest, main


@pytest.mark.slow  # trains a small hybrid
def test_smoke_run_scores_every_rule_at_every_level(tmp_path: Path) -> None:
    out = tmp_path / "backtest.json"
    assert main(["--data", "M3 other", "--limit", "80", "--json", str(out)]) == 0
    panel = json.loads(out.read_text())["panels"]["M3 other"]
    assert panel["windows"] > 0
    for rule in RULES:
        coverage = list(panel[rule]["coverage"].values())
        assert len(coverage) == len(LEVELS) and coverage == sorted(coverage)
        assert 0.0 <= panel[rule]["mean_miss"] <= 1.0
    assert set(panel["plain"]["factors"].values()) == {1.0}


def test_scores_that_halved_and_stayed_are_under_covered_by_the_factors() -> None:
    """Scores halved from origin 2 to origin 1 and stayed at origin 0: the plain quantiles of origin 1
    cover origin 0 as they should, the factors (about 0.5) under-cover it."""
    rng = np.random.default_rng(0)
    later = rng.exponential(1.0, (4000, 3))
    result = backtest([rng.exponential(1.0, (4000, 3)), later, 2 * later])
    assert abs(result["plain"]["coverage"]["80"] - 0.8) < 0.02
    assert result["tail-20"]["coverage"]["80"] < 0.6
    assert result["plain"]["mean_miss"] < result["tail-20"]["mean_miss"]
