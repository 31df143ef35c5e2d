"""Smoke form of bench/covariates.py on a small hourly series whose level a known covariate moves:
every variant and both peers run on the same origins. No verdict on which model wins; what is checked is
that the read-out with the covariate uses it (a covariate that explains most of the variance must lower
the test MSE well below the same model's without it)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import typer

from bench.covariates import Case, _independent, elecdemand, fit_variant, run_case, validation_case


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


def test_elecdemand_splits_as_the_issue_says() -> None:
    """fpp2's 17,520 half-hours from 2014-01-01 00:00 (row numbers, stamped here): the first ten months
    train, October is the validation part of training, the test is never in it."""
    case = elecdemand()
    assert len(case.y) == 17_520 and case.horizon == 48 and case.period == 48
    assert case.stamps[-1] == np.datetime64("2014-12-31T23:30", "ns")
    assert case.stamps[case.train_end] == np.datetime64("2014-11-01", "ns")
    val = validation_case(case)
    assert len(val.y) == case.train_end and val.stamps[val.train_end] == np.datetime64("2014-10-01", "ns")
    temp = case.covariates["cooling"] - case.covariates["heating"] + 18.0  # the declared transforms undone
    assert temp.min() > 0 and temp.max() > 40  # Melbourne in °C: the summer's heat waves reach 43
    assert set(np.unique(case.covariates["workday"])) == {0.0, 1.0}


def test_elecdemand_slice_reads_its_covariates() -> None:
    """The elecdemand path's read-out on its first 17 days (14 train, 3 test origins of H = 48): the
    temperature, WorkDay and calendar variant reads every covariate and forecasts every test half-hour.
    (The peers are left to the test above: AutoARIMA with a 48-step season took two minutes even here.)"""
    case = elecdemand()
    n, cut = 17 * 48, 14 * 48
    small = replace(
        case,
        y=case.y[:n],
        stamps=case.stamps[:n],
        covariates={k: v[:n] for k, v in case.covariates.items()},
        train_end=cut,
    )
    fc, info = fit_variant(small, tuple(case.covariates), case.calendar, irls=0, effect="both")
    assert fc.shape == (3, 48) and np.isfinite(fc).all()
    assert {r["covariate"] for r in info["report"]} == {"heating", "cooling", "workday", "calendar"}
    plain, _ = fit_variant(small, (), (), irls=0)
    assert not np.allclose(fc, plain)  # the covariates move the forecast


def test_peers_drop_a_column_that_adds_no_rank() -> None:
    """WorkDay is the weekday dummies' sum in a stretch without a public holiday: AutoARIMA would refuse
    X as rank deficient, so the peer drops it there (and a constant column)."""
    days = np.arange(28 * 48) // 48 % 7
    X = {f"dayofweek_{d}": (days == d).astype(float) for d in range(6)}
    X["workday"] = (days < 5).astype(float)
    X["cooling"] = np.zeros(days.size)
    X["noise"] = np.random.default_rng(0).standard_normal(days.size)
    kept = _independent(X, days.size)
    assert list(kept) == [*(f"dayofweek_{d}" for d in range(6)), "noise"]


def test_peers_from_an_earlier_run_take_its_peer_rows_and_refuse_another_case(tmp_path: Path) -> None:
    """`--peers-from`: the read-out variants fitted again, AutoARIMA+X's and MSTL's rows those of the
    earlier run of the same case (said in the result); a run of another peer fit is refused."""
    case = small_case()
    first = run_case(case, weeks=2, irls=0)
    path = tmp_path / "first.json"
    path.write_text(json.dumps(first, default=float))
    again = run_case(case, weeks=2, irls=0, peers_from=path, ablate=True)
    for label in ("AutoARIMA+X", "MSTL"):
        assert again["results"][label] == first["results"][label]
    assert again["results"]["covariates+calendar"]["mse"] == first["results"]["covariates+calendar"]["mse"]
    assert str(path) in again["peers_from"] and "peers_from" not in first and "ablation" not in first
    # `ablate`: the test without each covariate beside the report's verdict; the driver, which explains
    # most of the variance, helps on the test (the same model without it: the calendar variant)
    ablation = {a["covariate"]: a for a in again["ablation"]}
    assert set(ablation) == {"driver", "calendar"}
    driver = ablation["driver"]
    assert driver["test_helps"] and driver["validation_verdict"] == "helps"
    without = again["results"]["covariates+calendar without driver"]["mse"]
    assert without == driver["test_mse_without"] > 2 * driver["test_mse_with"]
    np.testing.assert_allclose(without, again["results"]["calendar"]["mse"], rtol=1e-9)
    with pytest.raises(typer.BadParameter, match="peer_fit"):
        run_case(case, weeks=3, irls=0, peers_from=path)
