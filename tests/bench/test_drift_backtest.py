"""bench.drift_backtest (issues 43 and 47): the drift rules set one origin earlier and scored on the last;
its smoke run on a slice of M3 other's histories."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.drift_backtest import LEVELS, RULES, backtest, drift_check, drift_factor, level_factors, main


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
    result = backtest([rng.exponential(1.0, (4000, 3)), later, 2 * later, 2 * later])
    assert abs(result["plain"]["coverage"]["80"] - 0.8) < 0.02
    assert result["tail-20"]["coverage"]["80"] < 0.6
    assert result["plain"]["mean_miss"] < result["tail-20"]["mean_miss"]


def test_two_origins_pooled_cover_a_last_origin_between_them_nearer_the_level_than_one() -> None:
    """Scores at origin 2 twice those at origin 1, and origin 0 between them: origin 1's quantiles alone
    under-cover it, the two pooled cover it nearer 80%."""
    rng = np.random.default_rng(2)
    a, b, fresh = (rng.exponential(1.0, (4000, 3)) for _ in range(3))
    result = backtest([1.5 * fresh, a, 2 * b, 2 * b])
    plain, pooled = result["plain"]["coverage"]["80"], result["pooled-2"]["coverage"]["80"]
    assert plain < 0.72 and abs(pooled - 0.8) < abs(plain - 0.8)
    assert result["pooled-2"]["factors"]["80"] > 1.0


def test_the_checked_rule_serves_the_factors_only_where_the_earlier_check_keeps_them() -> None:
    """Scores halved at every origin up to origin 1: the check (set at origin 2, scored on 1) sees the
    factors help and keeps them, so `checked` serves tail-20's factors (which then under-cover origin 0,
    where the scores stopped falling). Scores that halved from origin 3 to 2 and then stayed: the check
    sees the factors under-cover origin 1 and drops them, so `checked` serves the plain quantiles."""
    rng = np.random.default_rng(1)
    fresh, a, b = (rng.exponential(1.0, (4000, 3)) for _ in range(3))
    halving = backtest([fresh, a, 2 * a, 4 * a])
    assert halving["checked"]["factors"] == halving["tail-20"]["factors"]
    assert halving["checked"]["factors"]["80"] < 0.6
    stayed = backtest([fresh, b, a, 2 * a])
    assert set(stayed["checked"]["factors"].values()) == {1.0}
    assert stayed["checked"]["coverage"] == stayed["plain"]["coverage"]


# -- the rules measured (the exporter's until 2026-12-04) --------------------------------------------------


def test_drift_factor_is_the_quantiles_ratio_over_the_steps_capped_at_one() -> None:
    """Scores 0.8 times the earlier origin's give 0.8 at every level; grown, the factor stays 1; steps
    whose quantile is 0 at either origin are left out, and none left gives 1."""
    rng = np.random.default_rng(0)
    earlier = rng.exponential(1.0, (200, 6))
    for level in (20.0, 80.0):
        assert drift_factor(0.8 * earlier, earlier, level) == pytest.approx(0.8)
        assert drift_factor(1.3 * earlier, earlier, level) == 1.0
    later = 0.5 * earlier
    later[:, 0] = 0.0  # a step scored 0 (a flat series' window): left out, not a factor of 0
    assert drift_factor(later, earlier, 80.0) == pytest.approx(0.5)
    assert drift_factor(np.zeros((200, 6)), earlier, 80.0) == 1.0


def test_a_level_beyond_the_last_twenty_windows_takes_the_factor_of_the_level_below() -> None:
    """600 windows: 95% leaves 30 beyond its quantile, 99% 6. Only the 8 largest of the earlier origin
    are 10 times larger (a few wild windows), so the raw 99% ratio is far below the 95% one; the rule
    gives 99% the 95% factor."""
    rng = np.random.default_rng(3)
    earlier = rng.exponential(1.0, (600, 6))
    later = 0.8 * earlier
    wild = np.argsort(earlier, axis=0)[-8:]  # each step's 8 largest earlier scores
    np.put_along_axis(earlier, wild, np.take_along_axis(earlier, wild, 0) * 10, 0)
    levels = [50.0, 80.0, 95.0, 99.0]
    raw = [drift_factor(later, earlier, lv) for lv in levels]
    assert raw[3] < 0.2 < 0.75 < raw[2]  # the noise the rule keeps out
    factors = level_factors(later, earlier, levels)
    assert factors[:3] == pytest.approx([0.8, 0.8, 0.8])
    assert factors[3] == factors[2]
    # too few windows for any level's tail: no factor at all
    assert level_factors(later[:30], earlier[:30], [50.0, 80.0]) == [1.0, 1.0]


def test_the_check_keeps_the_factors_only_where_they_moved_coverage_towards_the_levels() -> None:
    rng = np.random.default_rng(4)
    levels = [50.0, 80.0]
    base = rng.exponential(1.0, (2000, 6))
    earlier, later = 2 * base, base.copy()  # the scores halved from one origin to the next
    still = rng.exponential(1.0, (2000, 6))  # ... and then stayed: halving again under-covers
    said = drift_check(still, later, earlier, levels)
    assert not said["kept"]
    assert said["coverage_drift"]["80"] < 0.7 < said["coverage_plain"]["80"]
    assert abs(said["coverage_plain"]["80"] - 0.8) < 0.03
    falling = 0.5 * rng.exponential(1.0, (2000, 6))  # ... and kept falling: the factors help
    said = drift_check(falling, later, earlier, levels)
    assert said["kept"] and abs(said["coverage_drift"]["80"] - 0.8) < 0.03
    assert said["windows"] == 2000
