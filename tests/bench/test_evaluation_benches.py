"""Smoke form of bench/backtest.py (a few windows of the ETTh1 test split, the target checked) and the
counting of bench/anomalies.py (injection, recall and precision on hand-made flags)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.anomalies import Event, Pass, inject, peer_scores, score_events


def test_the_backtest_bench_meets_its_target_on_a_few_windows(tmp_path: Path) -> None:
    from bench.backtest import main

    out = tmp_path / "backtest.json"
    assert main(["--windows", "6", "--horizon", "12", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["windows"] == 6 and report["met"] and report["max_abs_delta"] <= 1e-6
    assert report["served"]["points"] == 6 * 12 * 7


def test_injection_moves_values_by_the_clean_half_width() -> None:
    values = [np.zeros((10, 2))]
    clean = Pass([np.arange(4, 10)], [], [], [np.full((6, 2), 0.5)], [], [])
    spike = inject(values, clean, [Event(0, 5, 1, 4, 1)], "spike", np.array([-1.0]))
    assert spike[0][5, 1] == -2.0 and np.count_nonzero(spike[0]) == 1
    shift = inject(values, clean, [Event(0, 6, 0, 3, 3)], "shift", np.array([1.0]))
    assert shift[0][:, 0].tolist() == [0, 0, 0, 0, 0, 0, 1.5, 1.5, 0, 0]


def test_recall_and_precision_are_counted_per_event_and_per_flag() -> None:
    index = [np.arange(10, 20)]
    flags = np.zeros((10, 1), bool)
    flags[[2, 3, 7], 0] = True  # point 12 (a spike, found), 13 (a false alarm), 17 (the shift, late)
    events = [Event(0, 12, 0, 5, 1), Event(0, 15, 0, 6, 3)]
    spikes = score_events([flags], index, events[:1], "spike", tolerance=2)
    assert (spikes["recall"], spikes["precision"], spikes["flags"]) == (1.0, 1 / 3, 3)
    shifts = score_events([flags], index, events[1:], "shift", tolerance=2)
    assert shifts["recall"] == 0.0  # flagged 2 steps after the onset: outside a tolerance of 2
    assert shifts["precision"] == 1 / 3  # point 17 is inside the shift's span (onset .. return + 2)


def test_the_peer_scores_the_distance_in_robust_spreads() -> None:
    values = np.array([[1.0], [2.0], [3.0], [2.0], [1.0], [12.0]])
    (scores,) = peer_scores([values], [np.array([5])], window=5)
    mad = 1.4826 * 1.0  # median 2, absolute deviations 1, 0, 1, 0, 1
    assert scores[0, 0] == (12.0 - 2.0) / mad
