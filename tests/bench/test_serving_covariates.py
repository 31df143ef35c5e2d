"""bench.serving --covariates: the smoke form (both promo-panel models on one service on loopback, the
rounds alternating, every answer checked) and its checker shown to catch a service that drops the
covariate. No timing is asserted: only that each cell ran cleanly, that answers were checked, and that
the report states the target from every round."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import serving, serving_covariates
from bench.covariates import serving_pair
from bench.harness.load import Failure
from export.covariates import CovariateSeries, series_covariate_rows


def test_smoke_measures_both_models_every_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "serving.json"
    code = serving.main(["--covariates", "--smoke", "--json", str(report)])
    out = capsys.readouterr().out
    data = json.loads(report.read_text())
    assert code == 0 and data["passed"] and data["error"] is None and data["exit_code"] in (0, -15), out
    assert set(data["models"]) == {"plain", "promo"}
    assert data["models"]["promo"]["future_covariates"] == ["promo"]
    assert data["models"]["plain"]["future_covariates"] == []
    assert len(data["load_average_before"]) == 3 and len(data["load_average_after"]) == 3
    rounds = data["rounds"]
    assert [r["order"] for r in rounds] == [["plain", "promo"], ["promo", "plain"]]  # alternating
    for r in rounds:
        assert set(r["cells"]) == {"plain", "promo"}
        for model, cells in r["cells"].items():
            assert [c["concurrency"] for c in cells] == [1, 4], (model, cells)
            for c in cells:
                assert c["errors"] == {} and c["completed"] == c["requests"] == 20, (model, c)
                assert c["checked"] == c["completed"] + c["warmup"], (model, c)  # every answer checked
    # Each model's first answers were parsed and compared with the numpy read-out, not trusted.
    assert all(rounds[0]["cells"][m][0]["parsed_answers"] >= 1 for m in ("plain", "promo"))
    targets = {t["what"]: t for t in data["targets"]}
    assert set(targets) == {"promo / plain req/s, c=1", "promo / plain req/s, c=4"}
    for c, t in zip((1, 4), targets.values(), strict=True):
        each = [
            r["cells"]["promo"][i]["throughput_rps"] / r["cells"]["plain"][i]["throughput_rps"]
            for r in rounds
            for i, cell in enumerate(r["cells"]["promo"])
            if cell["concurrency"] == c
        ]
        assert t["rounds"] == pytest.approx(each) and t["value"] == pytest.approx(np.median(each))
        assert t["met"] is not None and t["goal"] == "≥ 0.9"
    assert "| promo / plain req/s, c=1 |" in out and "load average before" in out


def test_checker_catches_a_forecast_that_ignores_the_covariate() -> None:
    pair = serving_pair()
    work = serving_covariates.covariate_workloads(pair, {"plain": 1, "promo": 1}, windows=3)
    promo, plain = work["promo"], work["plain"]
    body = json.loads(promo.bodies[0])["series"][0]
    assert (
        len(body["future"]["promo"]) == pair.horizon
        and "future" not in json.loads(plain.bodies[0])["series"][0]
    )

    def answer(values: np.ndarray) -> bytes:
        forecast = {"id": body["id"], "forecast": values[0].tolist()}
        return json.dumps({"model": "promo", "version": 1, "forecasts": [forecast]}).encode()

    # The same window's forecast by the same model, its promotions over the horizon taken away.
    shop, end = body["id"].split("@")
    s = next(s for s in pair.panel if s.id == shop)
    assert s.future["promo"][int(end) : int(end) + pair.horizon].any()  # the window has promotions
    bare = CovariateSeries(s.id, s.values, s.timestamps, future={"promo": np.zeros(len(s))})
    assert pair.promo.covariates is not None
    rows = series_covariate_rows(bare, pair.promo.covariates, np.array([int(end)]))
    dropped = pair.promo.forecast([np.array(body["values"])], covariates=rows)[:, :, None]
    check = promo.checker.fresh()
    assert check(0, answer(promo.checker.expected[0])) is None
    wrong = check(0, answer(dropped))
    assert isinstance(wrong, Failure) and wrong.kind == "mismatch", wrong
    assert isinstance(check(0, answer(np.full((1, pair.horizon, 1), np.nan))), Failure)
