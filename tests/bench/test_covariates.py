"""Smoke form of bench/covariates.py on a small hourly series whose level a known covariate moves:
every variant and both peers run on the same origins. No verdict on which model wins; what is checked is
that the read-out with the covariate uses it (a covariate that explains most of the variance must lower
the test MSE well below the same model's without it)."""

from __future__ import annotations

import numpy as np

from bench.covariates import Case, run_case


def small_case(n: int = 24 * 7 * 8, seed: int = 0) -> Case:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    driver = rng.uniform(0.0, 1.0, n)  # known ahead, as a schedule
    y = 100 + 10 * np.sin(2 * np.pi * t / 24) + 40 * driver + rng.standard_normal(n)
    stamps = np.datetime64("2024-01-01T00:00", "ns") + t * np.timedelta64(1, "h")
    return Case(
        "small",
        y,
        stamps,
        {"driver": driver},
        ("hour",),
        24,
        24,
        2,
        n - 24 * 7,
        (24,),
        "synthetic",
    )


def test_every_variant_and_peer_runs_on_the_same_origins() -> None:
    result = run_case(small_case(), weeks=2, irls=0)
    rows = result["results"]
    assert set(rows) == {"none", "calendar", "covariates+calendar", "AutoARIMA+X", "MSTL"}
    assert result["test_origins"] == 7
    for row in rows.values():
        assert np.isfinite(row["mse"]) and np.isfinite(row["mae"])
    assert rows["covariates+calendar"]["mse"] < 0.5 * rows["none"]["mse"]
    assert {r["covariate"] for r in rows["covariates+calendar"]["report"]} == {"driver", "calendar"}
