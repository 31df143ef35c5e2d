"""The hybrid's weights tilted by series features, fitted on the validation origins
(export/global_models/hybrid.py `fit_tilt`): learned where a feature tells which member is right, trusted only
where it beats the base weights on series and origins it was not fitted on, and the base weights otherwise."""

from __future__ import annotations

import numpy as np

from app.artifacts.hybrid import FEATURES, softmax_weights
from export.global_models.hybrid import TiltData, fit_tilt, local_search, origins

H = 4
BASE = np.full(3, 1 / 3)  # the read-out and two members


def origin(seed: int, errors: object) -> TiltData:
    """400 series whose held values are 0, each member's forecast its error: `errors(features)` ->
    [S, 3] (read-out first), constant over the horizon."""
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((400, len(FEATURES)))
    e = errors(features)  # type: ignore[operator]
    return TiltData(
        forecasts=np.repeat(e[:, :, None], H, 2),
        held=np.zeros((400, H)),
        scale=np.ones(400),
        features=features,
        rows=np.ones(400, dtype=bool),
        ids=np.arange(400),
    )


def test_a_feature_that_tells_which_member_is_right_is_learned_and_trusted() -> None:
    # The first member is exact on series with a low first feature, the second on the others; the
    # read-out is off by 1 everywhere.
    def errors(f: np.ndarray) -> np.ndarray:
        low = f[:, 0] < 0
        return np.stack([np.ones(len(f)), np.where(low, 0.0, 2.0), np.where(low, -2.0, 0.0)], 1)

    data = [origin(0, errors), origin(1, errors)]
    tilt, scores = fit_tilt(data, BASE)
    assert tilt is not None and scores["tilt"] == 1.0
    for check in ("cross_origin", "cross_series"):
        assert scores[f"tilt_{check}"] < 0.8 * scores[f"equal_{check}"]
    w = softmax_weights(BASE, tilt.logits(data[0].features))
    low = data[0].features[:, 0] < 0
    assert (w[low, 1] > w[low, 2]).mean() > 0.9 and (w[~low, 2] > w[~low, 1]).mean() > 0.9


def test_where_the_base_weights_are_already_right_no_tilt_is_trusted() -> None:
    # The read-out is 1 too high, the first member 1 too low, the second exact: the equal shares'
    # combination is exact on every series, so no tilt can beat it on held-out series.
    def errors(f: np.ndarray) -> np.ndarray:
        return np.tile([1.0, -1.0, 0.0], (len(f), 1))

    tilt, scores = fit_tilt([origin(2, errors), origin(3, errors)], BASE)
    assert tilt is None and scores["tilt"] == 0.0
    assert scores["equal_cross_series"] == 0.0 and scores["tilt_cross_series"] >= 0.0


def test_one_origin_is_checked_on_alternating_series_alone() -> None:
    def errors(f: np.ndarray) -> np.ndarray:
        return np.stack(
            [np.ones(len(f)), np.where(f[:, 2] < 0, 0.0, 2.0), np.where(f[:, 2] < 0, -2.0, 0.0)], 1
        )

    tilt, scores = fit_tilt([origin(4, errors)], BASE)
    assert tilt is not None and "tilt_cross_origin" not in scores
    assert scores["tilt_cross_series"] < scores["equal_cross_series"]


def test_the_search_returns_the_chosen_set_with_or_without_a_tilt_and_reports_its_checks() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(96)
    series = [
        (20 + i) * (1 + 0.3 * np.sin(2 * np.pi * t / 12)) * (1 + 0.05 * rng.standard_normal(96)) + (i % 3) * t
        for i in range(24)
    ]
    val = origins(series, horizon=6, history=12, train_min=24, cut=lambda v, k: v[:-k])
    flat = [np.repeat(np.array([p[-1] for p in o.fit_part])[:, None], 6, 1) for o in val]
    spec, scores = local_search(val, flat, period=12, horizon=6)
    assert spec is not None and scores["tilt_origins"] == 2.0
    assert {"tilt_cross_origin", "equal_cross_origin", "tilt_cross_series", "equal_cross_series"} <= set(
        scores
    )
    trusted = all(scores[f"tilt_{c}"] < scores[f"equal_{c}"] for c in ("cross_origin", "cross_series"))
    assert (spec.tilt is not None) == trusted == (scores["tilt"] == 1.0)


def test_origins_and_splits_without_a_scored_series_give_no_say_and_no_warning() -> None:
    import dataclasses
    import warnings

    def errors(f: np.ndarray) -> np.ndarray:
        return np.stack(
            [np.ones(len(f)), np.where(f[:, 0] < 0, 0.0, 2.0), np.where(f[:, 0] < 0, -2.0, 0.0)], 1
        )

    full, empty = origin(5, errors), origin(6, errors)
    empty = dataclasses.replace(empty, rows=np.zeros(400, dtype=bool))
    evens = dataclasses.replace(full, rows=full.ids % 2 == 0)  # one side of the series split only
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tilt, scores = fit_tilt([full, empty], BASE)  # one origin left: checked on series alone
        assert tilt is not None and "tilt_cross_origin" not in scores
        assert all(np.isfinite(v) for v in scores.values())
        tilt, scores = fit_tilt([evens, empty], BASE)  # fitted on no series: the base weights
        assert tilt is None and scores["tilt"] == 0.0
        assert scores["tilt_cross_series"] == scores["equal_cross_series"]
        assert all(np.isfinite(v) for v in scores.values())


def test_the_tilt_is_fitted_on_the_earlier_origins_too() -> None:
    rng = np.random.default_rng(7)
    t = np.arange(120)
    series = [
        (20 + i) * (1 + 0.3 * np.sin(2 * np.pi * t / 12)) * (1 + 0.05 * rng.standard_normal(120))
        + (i % 3) * t
        for i in range(24)
    ]
    every = origins(series, horizon=6, history=12, train_min=24, cut=lambda v, k: v[:-k], n_origins=4)
    assert len(every) == 4
    flat = [np.repeat(np.array([p[-1] for p in o.fit_part])[:, None], 6, 1) for o in every]
    calls = []

    def earlier() -> tuple[list, list]:
        calls.append(1)
        return every[2:], flat[2:]

    spec, scores = local_search(every[:2], flat[:2], period=12, horizon=6, earlier=earlier)
    assert spec is not None and calls == [1] and scores["tilt_origins"] == 4.0
    two, two_scores = local_search(every[:2], flat[:2], period=12, horizon=6)
    assert two is not None and two.members == spec.members and two.length == spec.length  # the set alike
    assert two_scores["equal_cross_series"] != scores["equal_cross_series"]  # checked on more series
    # No hybrid: the earlier origins are never built.
    _, _ = local_search(every[:2], [o.held for o in every[:2]], period=12, horizon=6, earlier=earlier)
    assert calls == [1]
