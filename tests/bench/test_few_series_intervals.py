"""bench.few_series_intervals (issue 45): a smoke run of lone series, and the bootstrap interval."""

from __future__ import annotations

import numpy as np
import pytest

from bench.few_series_intervals import bootstrap_interval, calibrated_ratios, main


def test_the_bootstrap_interval_widens_with_fewer_groups_and_holds_the_pooled_share() -> None:
    rng = np.random.default_rng(0)
    groups = [rng.random(18) < 0.8 for _ in range(400)]
    low, high = bootstrap_interval(groups, rng)
    pooled = np.concatenate(groups).mean()
    few_low, few_high = bootstrap_interval(groups[:20], rng)
    assert low < pooled < high and high - low < few_high - few_low
    assert bootstrap_interval([np.ones(5, bool)] * 3, rng) == (1.0, 1.0)


def test_the_tail_ratios_read_only_levels_the_windows_calibrated() -> None:
    widths = [[[1.0], [2.0]], [[1.5], [2.0]], [[2.0], [3.0]], [[3.0], [4.5]]]  # 80, 90, 95, 99 x 2 steps
    intervals = {"levels": [80.0, 90.0, 95.0, 99.0], "widths": widths, "calibration": {}}
    assert calibrated_ratios(intervals) == pytest.approx({"80-90": 1.25, "90-95": 17 / 12, "95-99": 1.5})
    intervals["calibration"]["extrapolated_levels"] = [99.0]
    assert set(calibrated_ratios(intervals)) == {"80-90", "90-95"}
    intervals["calibration"]["floored_levels"] = [95.0]  # held by 90%'s width: not the windows' own tail
    assert set(calibrated_ratios(intervals)) == {"80-90"}


def test_a_smoke_run_scores_lone_series_with_their_intervals(tmp_path) -> None:
    out = tmp_path / "few.json"
    report = main(["--data", "Tourism:quarterly", "--sizes", "1", "--groups", "6", "--json", str(out)])
    (r,) = report["results"]
    assert r["series_per_model"] == 1 and r["groups"] == 6 and out.exists()
    assert set(r["tail_ratios"]) == {"80-90", "90-95", "95-99"} and report["tail_ratio"]["95-99"] == 1.537
    eighty = r["levels"]["80.0"]
    assert (
        eighty["groups"] >= 1
        and 0.0 <= eighty["bootstrap_90"][0] <= eighty["coverage"] <= eighty["bootstrap_90"][1]
    )


def test_the_fit_share_rule_runs_for_the_bench_alone() -> None:
    """`--fit-share 0.2` (the fit on request's tail until 2026-12-05) holds out 20% of each lone series:
    fewer windows than the export's rule on the same groups, and the export's rule is back afterwards."""
    from export.global_models import calibration

    before = calibration.calibration_tail
    argv = ["--data", "Tourism:quarterly", "--sizes", "1", "--groups", "4"]
    share = main([*argv, "--fit-share", "0.2"])
    assert calibration.calibration_tail is before
    export = main(argv)
    assert share["command"].endswith("--fit-share 0.2") and "--fit-share" not in export["command"]
    assert share["results"][0]["windows_median"] < export["results"][0]["windows_median"]
