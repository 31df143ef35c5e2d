"""bench.few_series_intervals (issue 45): a smoke run of lone series, and the bootstrap interval."""

from __future__ import annotations

import numpy as np

from bench.few_series_intervals import bootstrap_interval, main


def test_the_bootstrap_interval_widens_with_fewer_groups_and_holds_the_pooled_share() -> None:
    rng = np.random.default_rng(0)
    groups = [rng.random(18) < 0.8 for _ in range(400)]
    low, high = bootstrap_interval(groups, rng)
    pooled = np.concatenate(groups).mean()
    few_low, few_high = bootstrap_interval(groups[:20], rng)
    assert low < pooled < high and high - low < few_high - few_low
    assert bootstrap_interval([np.ones(5, bool)] * 3, rng) == (1.0, 1.0)


def test_a_smoke_run_scores_lone_series_with_their_intervals(tmp_path) -> None:
    out = tmp_path / "few.json"
    report = main(["--data", "Tourism:quarterly", "--sizes", "1", "--groups", "6", "--json", str(out)])
    (r,) = report["results"]
    assert r["series_per_model"] == 1 and r["groups"] == 6 and out.exists()
    eighty = r["levels"]["80.0"]
    assert (
        eighty["groups"] >= 1
        and 0.0 <= eighty["bootstrap_90"][0] <= eighty["coverage"] <= eighty["bootstrap_90"][1]
    )
