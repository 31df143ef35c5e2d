"""The anomaly check's repair rounds (app/inference/repair.py) on a model of numpy, without the service:
they end within their bound and judge every point, also where every point is flagged, and each point's
last forecast is the one its window as repaired gives."""

from __future__ import annotations

import numpy as np
import pytest

from app.inference.repair import Repair

L, H, HALF = 6, 4, 1.0  # window, horizon, the interval's half-width


def forecast(window: np.ndarray, step: int) -> np.ndarray:
    """A damped mean of the window's last 3 rows, `step` steps ahead: [C]."""
    return window[-3:].mean(axis=0) * 0.9**step


def run(values: list[np.ndarray], lead: int) -> tuple[Repair, int, list[list[tuple[np.ndarray, int]]]]:
    """The first pass, then the rounds as app/protocols/rsa_v1/evaluation.py runs them: the repair, the
    rounds it took and each checked point's last window and step."""
    first = L + lead - 1
    last = [[(v[t - lead + 1 - L : t - lead + 1].copy(), lead) for t in range(first, len(v))] for v in values]
    f = np.array([forecast(w, step) for points in last for w, step in points])
    repair = Repair(
        values, [first] * len(values), lead, H, L, [0] * len(values), f, f - HALF, f + HALF, f * 0 + HALF
    )
    rounds = 0
    while any(planned := repair.next_round()):
        rounds += 1
        assert rounds <= repair.rounds_at_most()
        for s, points in enumerate(planned):
            if not points:
                continue
            now = repair.values(s)
            for j, step in points:
                t = first + j
                last[s][j] = (now[t - step + 1 - L : t - step + 1].copy(), step)
            a = np.array([forecast(*last[s][j]) for j, _ in points])
            repair.update(s, [j for j, _ in points], [a, a - HALF, a + HALF, a * 0 + HALF])
    return repair, rounds, last


@pytest.mark.parametrize("lead", [1, 2])
@pytest.mark.parametrize("kind", ["spikes", "every point alternating", "shifts"])
def test_the_rounds_end_and_judge_every_point_from_its_window_as_repaired(lead: int, kind: str) -> None:
    rng = np.random.default_rng(lead)
    values = []
    for n in (60, 200, 17):
        v = rng.normal(0, 0.2, (n, 3))
        if kind == "spikes":
            v[10::7, 0] += 9.0
            v[13::11, 2] -= 9.0
        elif kind == "every point alternating":
            v += np.where(np.arange(n) % 2 == 0, 9.0, -9.0)[:, None]
        else:
            v[20:, 1] += 9.0
            v[40:, :] -= 9.0
        values.append(v)
    repair, rounds, last = run(values, lead)
    assert all(state.judged.all() for state in repair.series)
    assert rounds <= repair.rounds_at_most()
    offset = 0
    for s, v in enumerate(values):
        final = repair.values(s)
        replaced = (final != v).any(axis=1)
        for j, (window, step) in enumerate(last[s]):
            t = L + lead - 1 + j
            want = lead  # further ahead past the replaced values the window would end with
            while want < min(H, t + 1) and replaced[t - want]:
                want += 1
            assert step == want, (s, j)
            np.testing.assert_array_equal(window, final[t - step + 1 - L : t - step + 1])  # as repaired
            np.testing.assert_array_equal(repair.forecast[offset + j], forecast(window, step))
        offset += len(last[s])


def test_a_spike_every_few_points_takes_a_few_rounds_each() -> None:
    """A few rounds per anomaly, not one per point after the first (what cut the long checks short: 370
    rounds here): a round for the spike's own, and one for each of the 3 points whose latest forecast it
    moved outside the interval, where the round's forecasts stop."""
    v = np.random.default_rng(0).normal(0, 0.2, (400, 1))
    v[20:380:10, 0] += 9.0  # 36 spikes
    repair, rounds, _ = run([v], 1)
    assert all(state.judged.all() for state in repair.series)
    assert rounds <= 4 * 36 + 8, rounds
