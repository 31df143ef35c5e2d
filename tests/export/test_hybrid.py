"""The validation every global model's choices are made on (export/global_models/hybrid.py): two origins, the
series too short to hold a training window before an origin left out of its score, and the hybrid's local
window chosen on them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.artifacts.hybrid import LocalSpec
from app.inference.metrics import mase
from export.global_models.config import PanelConfig
from export.global_models.hybrid import (
    MEMBER_SETS,
    WINDOW_TOLERANCE,
    candidate_sets,
    fit_members,
    hybrid_score,
    local_search,
    origins,
    short_lengths,
    short_min_values,
    tail_windows,
    widest_near_best,
)
from export.global_models.search import summary_lines, train_global


def cut(v: np.ndarray, k: int) -> np.ndarray:
    return v[:-k]


def test_two_origins_hold_out_the_last_h_and_the_h_before_half_a_horizon_earlier() -> None:
    series = [np.arange(100.0), np.arange(60.0)]
    val = origins(series, horizon=6, history=12, train_min=24, cut=cut)
    assert len(val) == 2
    np.testing.assert_array_equal(val[0].held[0], np.arange(94.0, 100.0))
    np.testing.assert_array_equal(val[1].held[0], np.arange(91.0, 97.0))  # back H + H // 2 = 9
    assert [len(p) for p in val[1].fit_part] == [91, 51]


def test_a_series_shorter_than_a_training_window_before_the_origin_is_not_scored() -> None:
    series = [np.arange(80.0)] * 3 + [np.arange(30.0)] * 2  # 30 - 6 = 24 < train_min 36
    (first, *_) = origins(series, horizon=6, history=12, train_min=36, cut=cut)
    assert first.scored.tolist() == [True, True, True, False, False]
    # A forecast that is wrong only on the short series scores as if it were right.
    forecast = first.held.copy()
    forecast[3:] += 1000.0
    assert first.score(forecast, period=12) == 0.0


def test_all_series_are_scored_when_most_are_short_and_a_later_origin_needs_a_window() -> None:
    series = [np.arange(80.0)] + [np.arange(30.0)] * 3
    val = origins(series, horizon=6, history=12, train_min=36, cut=cut)
    assert val[0].scored.all()  # fewer than half long enough: every series counts
    few = origins([np.arange(40.0)] * 3, horizon=6, history=12, train_min=30, cut=cut)
    assert len(few) == 1  # 40 - 9 = 31 < train_min + H = 36: no window before the second origin


def test_the_local_window_is_chosen_on_the_origins() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(96)
    series = [
        (20 + i) * (1 + 0.3 * np.sin(2 * np.pi * t / 12)) * (1 + 0.01 * rng.standard_normal(96))
        for i in range(8)
    ]
    val = origins(series, horizon=6, history=12, train_min=24, cut=cut)
    flat = [np.repeat(np.array([p[-1] for p in o.fit_part])[:, None], 6, 1) for o in val]  # a poor read-out
    spec, scores = local_search(val, flat, period=12, horizon=6)
    assert spec.members in MEMBER_SETS and spec.length % 12 == 0
    chosen = scores[f"local_{'+'.join(spec.members)}_{spec.length}"]
    best = min(v for k, v in scores.items() if k.startswith("local_"))
    assert best <= chosen <= best * (1 + WINDOW_TOLERANCE)  # a longer window within the tolerance
    assert chosen < scores["global"]  # the local models see the season
    assert tail_windows(series, spec.length).shape == (8, spec.length)


def test_an_origin_scores_and_fits_each_member_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search scores hundreds of forecasts per origin and the lifted read-out's score reuses the local
    members `local_search` fitted: the same numbers as fitting and scaling afresh."""
    import export.global_models.hybrid as hybrid

    rng = np.random.default_rng(5)
    t = np.arange(96)
    series = [(20 + i) * (1 + 0.3 * np.sin(2 * np.pi * t / 12)) + rng.standard_normal(96) for i in range(8)]
    val = origins(series, horizon=6, history=12, train_min=24, cut=cut)
    flat = [np.repeat(np.array([p[-1] for p in o.fit_part])[:, None], 6, 1) for o in val]
    for o, g in zip(val, flat, strict=True):
        fresh = mase([np.asarray(v) for v in o.fit_part], o.held, g, 12)[o.scored].mean()
        assert o.score(g, 12) == o.score(g, 12) == fresh
    spec, scores = local_search(val, flat, period=12, horizon=6)
    assert spec is not None
    fitted: list[tuple[str, ...]] = []
    real = hybrid.fit_members
    monkeypatch.setattr(hybrid, "fit_members", lambda *a: fitted.append(tuple(a[4])) or real(*a))
    again = hybrid_score(val, flat, replace(spec, tilt=None))
    assert fitted == []  # every member was fitted by the search at this window
    assert again == scores[f"local_{'+'.join(spec.members)}_{spec.length}"]
    fresh_fit = fit_members(val[0].fit_part, spec.length, 12, 6, spec.members, spec.min_values)
    got = val[0].members(spec.length, 12, 6, spec.members, spec.min_values)
    assert all(np.array_equal(got[0][m], fresh_fit[0][m], equal_nan=True) for m in spec.members)


def test_the_cycle_decides_which_arima_and_season_members_are_tried() -> None:
    """With a cycle: Holt-Winters and the automatic seasonal ARIMA, never the airline model; without one:
    the airline model (ARIMA(0,2,2)), neither of the others. Every set tried is one a manifest may hold."""
    seasonal, plain = candidate_sets(12), candidate_sets(1)
    assert any("hw" in s for s in seasonal) and any("arima" in s for s in seasonal)
    assert not any("airline" in s for s in seasonal)
    assert any("airline" in s for s in plain)
    assert not any("hw" in s or "arima" in s for s in plain)
    assert len(seasonal) == len(set(seasonal)) and set(seasonal) | set(plain) <= set(MEMBER_SETS)


def test_no_hybrid_where_none_validates_better_than_the_read_out_alone() -> None:
    rng = np.random.default_rng(4)
    t = np.arange(72)
    series = [(30 + i) * (1 + 0.3 * np.sin(2 * np.pi * t / 12)) + rng.standard_normal(72) for i in range(6)]
    val = origins(series, horizon=6, history=12, train_min=24, cut=cut)
    spec, scores = local_search(val, [o.held for o in val], period=12, horizon=6)  # a perfect read-out
    assert spec is None and scores["global"] == 0.0
    assert all(v > 0 for k, v in scores.items() if k.startswith("local_"))


def test_the_widest_set_near_the_best_is_chosen_among_those_better_than_the_read_out_alone() -> None:
    def spec(*members: str) -> LocalSpec:
        return LocalSpec(members, (1 / (len(members) + 1),) * len(members), 24, 12, 6, 24)

    two, three, four = (
        spec("theta", "damped"),
        spec("dotm", "damped", "sar"),
        spec("theta", "dotm", "damped", "sar"),
    )
    # Within 1% of the best: the widest; beyond it, the best alone.
    assert widest_near_best([(1.000, two), (1.009, three)], alone=2.0) == three
    assert widest_near_best([(1.000, two), (1.011, three)], alone=2.0) == two
    # Equal widths: the lower score.
    assert widest_near_best([(1.005, three), (1.000, spec("theta", "damped", "sar"))], 2.0) == spec(
        "theta", "damped", "sar"
    )
    # A near set no better than the read-out alone does not compete (Tourism monthly: the best set 1.7602,
    # the read-out 1.7656, the four-member set 1.7701), and none better: the read-out alone.
    assert widest_near_best([(1.7602, three), (1.7701, four)], alone=1.7656) == three
    assert widest_near_best([(1.80, three), (1.81, four)], alone=1.7656) is None
    assert widest_near_best([], alone=1.0) is None


def test_the_served_min_values_is_the_fewest_cycles_from_which_the_hybrid_validates_better() -> None:
    """short_min_values: scores per short history length (hybrid, read-out alone); monthly lengths 24,
    30, 36, 42."""
    win, lose = (1.0, 1.1), (1.2, 1.1)
    assert short_lengths(12) == [24, 30, 36, 42] and short_lengths(4) == [8, 10, 12, 14]
    assert short_lengths(1) == []  # without a cycle the members wait for no season
    assert short_min_values({24: win, 30: win, 36: win, 42: win}, 12, 120) == 24
    assert short_min_values({24: lose, 30: win, 36: win, 42: win}, 12, 120) == 36  # from 3 cycles on
    assert short_min_values({24: win, 30: win, 36: lose, 42: win}, 12, 120) == 48  # loses at 3: wait for 4
    assert short_min_values({24: lose, 30: lose, 36: lose, 42: lose}, 12, 120) == 48
    assert short_min_values({24: lose, 36: lose}, 12, 36) == 36  # at most the members' window
    assert short_min_values({8: (1.0, 1.0)}, 4, 40) == 8  # a tie keeps the local models


def test_a_trained_hybrid_serves_the_min_values_its_short_histories_validated() -> None:
    """train_global scores the hybrid and the read-out alone on histories cut to 2-3.5 cycles at each
    validation origin (`short_<n>`, `short_<n>_readout`) and serves the `min_values` those scores give;
    a series shorter than it is forecast by the read-out alone."""
    rng = np.random.default_rng(0)
    t = np.arange(84)
    series = [
        (100 + np.cumsum(rng.normal(0, 3, 84)) + rng.uniform(-1, 1) * t)
        * (1 + rng.uniform(0.1, 0.4) * np.sin(2 * np.pi * (t + i) / 12))
        for i in range(30)
    ]
    cfg = PanelConfig(horizon=6, period=12, input_periods=2, lift=0)
    model = train_global(series, cfg, local=True)
    assert model.local is not None
    scores = {n: (model.search[f"short_{n}"], model.search[f"short_{n}_readout"]) for n in short_lengths(12)}
    assert model.local.min_values == short_min_values(scores, 12, model.local.length)
    said = summary_lines(model)[-1]  # what `export.panel train` prints
    assert said.startswith("histories cut short (validation MASE, the hybrid / the read-out alone): 24: ")
    assert said.endswith(f"the local models from {model.local.min_values} values, the read-out alone below")
    short = series[0][-(model.local.min_values - 1) :]
    alone = replace(model, local=None).forecast([short])
    np.testing.assert_allclose(model.forecast([short]), alone, rtol=1e-12)
