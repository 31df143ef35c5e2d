"""Issue 45, item 6: the covariate report judges each covariate on several origins (a verdict of
"helps" needs a lower mean MASE, a lower MASE at most origins and no higher MSE; lower on the mean alone
is "unclear"), and `--effect auto` searches the input length under each effect, keeping the pair of
lowest validation MASE."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from export import covariates
from export.covariates import CovariatePlan, CovariateSeries, ablation_rows, covariate_lines
from export.global_models import search as panel  # the search and its validation (the CLI is cli.py)
from export.global_models.config import PanelConfig
from tests.export.test_covariates_served import shop

H = 7


def shops(n: int = 6, days: int = 120) -> list[CovariateSeries]:
    out = []
    for i in range(n):
        s = shop(i, days)
        stamps = pd.date_range("2023-01-02", periods=days, freq="D").to_numpy().astype("datetime64[ns]")
        out.append(
            CovariateSeries(
                f"shop_{i}", s["y"], stamps, future={"promo": s["promo"]}, past={"footfall": s["footfall"]}
            )
        )
    return out


def plan_of(series: list[CovariateSeries], effect: str) -> CovariatePlan:
    return CovariatePlan.fit(series, ["footfall"], ["promo"], [], [], effect=effect)


def fake(scores: dict[str, tuple[float, float, tuple[float, ...]]]) -> Any:
    """`scored` of a plan: by the group it lacks ("" for all of them)."""

    def scored(p: CovariatePlan | None) -> tuple[float, float, tuple[float, ...]]:
        groups = set(p.groups) if p is not None else set()
        missing = {"promo", "footfall"} - groups
        return scores[missing.pop() if missing else ""]

    return scored


def test_a_verdict_needs_most_origins_and_no_worse_mse() -> None:
    series = shops(2, 60)
    plan = plan_of(series, "relative")
    rows = ablation_rows(
        plan,
        fake(
            {
                "": (0.50, 0.20, (0.4, 0.5, 0.6, 0.5)),
                # without footfall: worse on the mean, at 1 origin of 4 only: lower mean alone, unclear
                "footfall": (0.505, 0.19, (0.39, 0.49, 0.59, 0.55)),
                # without promo: worse everywhere, MSE too: helps
                "promo": (0.90, 0.80, (0.8, 0.9, 1.0, 0.9)),
            }
        ),
    )
    by = {r["covariate"]: r for r in rows}
    assert (by["promo"]["verdict"], by["promo"]["helps"], by["promo"]["wins"]) == ("helps", True, 4)
    assert (by["footfall"]["verdict"], by["footfall"]["helps"], by["footfall"]["wins"]) == (
        "unclear",
        False,
        1,
    )
    worse_mse = ablation_rows(
        plan,
        fake(
            {
                "": (0.50, 0.30, (0.4, 0.5, 0.6, 0.5)),
                "footfall": (0.51, 0.20, (0.41, 0.51, 0.61, 0.51)),  # lower MASE everywhere, MSE higher
                "promo": (0.40, 0.10, (0.3, 0.4, 0.5, 0.4)),  # the model is better without it
            }
        ),
    )
    by = {r["covariate"]: r for r in worse_mse}
    assert by["footfall"]["verdict"] == "unclear" and by["promo"]["verdict"] == "does not help"
    lines = covariate_lines(worse_mse)
    assert "lower at 4 of 4 origins" in lines[0] and "UNCLEAR" in lines[0], lines
    assert "DOES NOT HELP" in lines[1], lines


def test_one_origin_is_too_few_to_say_a_covariate_helps() -> None:
    """A lone short series leaves room for one validation origin: lower there is "unclear", said so."""
    rows = ablation_rows(
        plan_of(shops(2, 60), "relative"),
        fake({"": (0.50, 0.20, (0.50,)), "footfall": (0.51, 0.21, (0.51,)), "promo": (0.9, 0.8, (0.9,))}),
    )
    got = [(r["verdict"], r["helps"], r["wins"], r["origins"]) for r in rows]
    assert got == [("unclear", False, 1, 1)] * 2
    assert all("UNCLEAR: scored at 1 origin only, too few to judge" in line for line in covariate_lines(rows))


def test_the_report_scores_several_origins() -> None:
    series = shops()  # six series: few, so the origins are spread a week and a day apart
    cfg = PanelConfig(horizon=H, period=7, input_periods=2)
    rows = panel.covariate_report(series, cfg, 14, plan_of(series, "relative"))
    for row in rows:
        assert row["origins"] == covariates.REPORT_SPREAD_ORIGINS and 0 <= row["wins"] <= row["origins"]
        assert row["origin_spacing"] == 8 and len(row["origin_starts"]) == row["origins"]
    assert {r["covariate"]: r["verdict"] for r in rows}["promo"] == "helps"  # a 30% effect


def test_auto_searches_the_input_length_under_each_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(panel, "INPUT_PERIODS", (1, 2))
    series = shops()
    cfg = PanelConfig(horizon=H, period=7)
    model = panel.train_global(series, cfg, plan=plan_of(series, "auto"), report=False)
    grid = {
        (length, e): panel._validate(series, cfg, length, plan_of(series, e))[0]
        for length in (7, 14)
        for e in ("relative", "both")
    }
    best, effect = min(grid, key=lambda k: grid[k])
    assert model.input_length == best and model.covariates is not None and model.covariates.effect == effect
    for e in ("relative", "both"):
        assert model.search[f"effect_{e}"] == pytest.approx(min(grid[n, e] for n in (7, 14)))
    for n in (7, 14):
        assert model.search[str(n)] == pytest.approx(min(grid[n, e] for e in ("relative", "both")))
    assert model.search["model"] == pytest.approx(grid[best, effect])
    assert np.isfinite(list(model.search.values())).all()
