"""A covariate model refitted on request (issue 45, item 2): `fit_forecast` and `cross_validation`'s
`refit` read each series' covariates over its history (`future` also over the steps forecast), cut each
training window's rows from them, and equal the exporter's own fit (app/artifacts/readout.py, fed by
export/covariates.py's `series_covariate_rows`) on the same values; a refit is published and served with
the same forecasts. The model is tests/export/test_covariates_served.py's shops (future promo, past
footfall, static size, day of week)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from app.artifacts.readout import CovariateRows, fit_weights, forecast
from export.covariates import CovariateSeries, series_covariate_rows
from export.global_models.model import GlobalModel
from export.global_models.onnx import export_global, readout_spec
from tests.app.conftest import make_settings, running_client
from tests.app.protocols.rsa_v1.test_evaluation_covariates import history_series
from tests.export.test_covariates_served import DAYS, NAME, Served, request_series, served

__all__ = ["served"]

H = 7  # the shops model's horizon
SHOPS = ("shop_0", "shop_3", "shop_5")


def exporters_forecast(model: GlobalModel, shops: list[dict[str, Any]], cut: int) -> np.ndarray:
    """[S, H]: the exporter's read-out fitted on every shop's first `cut` values (each training window's
    covariate row by the trainer's code), forecasting the H days after them."""
    layout = model.covariates
    assert layout is not None
    spec = readout_spec(model)
    full = [
        CovariateSeries(
            "x",
            s["y"][: cut + H],
            s["stamps"][: cut + H].to_numpy().astype("datetime64[ns]"),
            past={"footfall": s["footfall"][: cut + H]},
            future={"promo": s["promo"][: cut + H]},
            static={"size": s["size"]},
        )
        for s in shops
    ]
    rows = CovariateRows(layout, lambda i, ends: series_covariate_rows(full[i], layout, ends))
    histories = [s["y"][:cut] for s in shops]
    weights = fit_weights(histories, spec.fit, spec.kernels(), None, rows)
    last = np.concatenate([series_covariate_rows(f, layout, np.array([cut])) for f in full])
    return forecast(weights, histories, spec.fit, spec.kernels(), layout=layout, covariates=last)


def fit_body(served: Served, n: int, reach: int = H, **extra: Any) -> dict[str, Any]:
    return {"series": [history_series(served.shops[sid], sid, n, reach) for sid in SHOPS], **extra}


def test_fit_forecast_of_a_covariate_model_is_the_exporters_fit(served: Served) -> None:
    n = DAYS - H
    r = served.client.post(f"/v1/models/{NAME}/fit_forecast", json=fit_body(served, n, level=[50]))
    assert r.status_code == 200, r.text
    answer = r.json()
    got = np.array([f["forecast"] for f in answer["forecasts"]])[:, :, 0]
    want = exporters_forecast(served.model, [served.shops[sid] for sid in SHOPS], n)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
    assert answer["fit"]["series"] == 3 and answer["fit"]["windows"] > 0
    # The covariates are read: other promotions over the history, another fit.
    flipped = fit_body(served, n)
    flipped["series"][0]["future"]["promo"] = [1 - p for p in flipped["series"][0]["future"]["promo"]]
    other = served.client.post(f"/v1/models/{NAME}/fit_forecast", json=flipped).json()
    assert not np.allclose(np.array(other["forecasts"][1]["forecast"])[:, 0], got[1])


def test_a_covariate_fit_asks_for_the_values_it_reads(served: Served) -> None:
    """`future` holds the history's values and the `horizon` steps forecast; the model's H − horizon
    further steps may be left out (the training mean); fewer is refused naming the field and the length,
    as is a horizon above H (a covariate read-out reads H future steps) and a missing calendar start."""
    n, h = DAYS - H, 3
    path = f"/v1/models/{NAME}/fit_forecast"
    r = served.client.post(path, json=fit_body(served, n, reach=h, horizon=h))
    assert r.status_code == 200, r.text
    r = served.client.post(path, json=fit_body(served, n, reach=h - 1, horizon=h))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "series[0].future.promo" and error["limit"] == n + h, error
    assert "then the 3 steps forecast" in error["message"], error
    r = served.client.post(path, json=fit_body(served, n, horizon=H + 1))
    assert r.status_code == 422 and r.json()["error"]["field"] == "horizon", r.text
    body = fit_body(served, n)
    del body["series"][2]["start"]
    r = served.client.post(path, json=body)
    assert r.status_code == 422 and r.json()["error"]["field"] == "series[2].start", r.text


def test_a_backtest_refits_a_covariate_model_as_the_exporter_fits(served: Served) -> None:
    n, k = DAYS - 5, 2
    body = {
        "series": [history_series(served.shops[sid], sid, n) for sid in SHOPS],
        "n_windows": k,
        "step_size": 4,
    }
    r = served.client.post(f"/v1/models/{NAME}/cross_validation", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["refit"] is True  # the default where the version can be refitted
    shops = [served.shops[sid] for sid in SHOPS]
    for j in range(k):
        cut = answer["series"][0]["windows"][j]["cutoff"]
        want = exporters_forecast(served.model, shops, cut)
        for s, result in enumerate(answer["series"]):
            window = result["windows"][j]
            assert window["cutoff"] == cut and window["in_sample"] is False
            np.testing.assert_allclose(np.array(window["forecast"])[:, 0], want[s], rtol=1e-5, atol=1e-3)
    served_weights = served.client.post(
        f"/v1/models/{NAME}/cross_validation", json={**body, "refit": False}
    ).json()
    assert served_weights["refit"] is False
    assert not np.allclose(
        served_weights["series"][0]["windows"][0]["forecast"], answer["series"][0]["windows"][0]["forecast"]
    )


def test_a_covariate_refit_is_published_and_served_with_the_same_forecasts(
    served: Served, tmp_path: Path
) -> None:
    export_global(served.model, tmp_path / "repo", NAME)
    settings = make_settings(tmp_path / "repo", api_keys=["cov-key"], model_control="explicit")
    auth = {"Authorization": "Bearer cov-key"}
    n = DAYS - H
    with running_client(settings) as client:
        body = fit_body(served, n, publish={"model": NAME})
        r = client.post(f"/v1/models/{NAME}/fit_forecast", json=body, headers=auth)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["fit"]["published"] == {"model": NAME, "version": 2}
        load = client.post(f"/v2/repository/models/{NAME}/load", headers=auth)
        assert load.status_code == 200, load.text
        series = [request_series(served.shops[sid], sid, n) for sid in SHOPS]
        again = client.post(f"/v1/models/{NAME}/versions/2/forecast", json={"series": series}, headers=auth)
        assert again.status_code == 200, again.text
    for a, b in zip(again.json()["forecasts"], answer["forecasts"], strict=True):
        np.testing.assert_allclose(a["forecast"], b["forecast"], rtol=1e-4, atol=1e-3)


def test_a_series_sent_with_nulls_before_it_began_is_fitted_from_its_first_value(served: Served) -> None:
    """shop_0's first 20 days sent as nulls (a later shop in a wide file): `fit_forecast` and a refitting
    backtest answer what they answer for shop_0 sent from its 21st day, its start and covariates from
    there (app/inference/windows.py `not_started`; the covariates cut by `HistoryRows.from_row`)."""
    n, k = DAYS - H, 20
    late = fit_body(served, n)
    late["series"][0]["values"][:k] = [None] * k
    later = fit_body(served, n)
    first = later["series"][0]
    first["start"] = served.shops["shop_0"]["stamps"][k].date().isoformat()
    first["values"] = first["values"][k:]
    first["future"] = {"promo": first["future"]["promo"][k:]}
    first["past"] = {"footfall": first["past"]["footfall"][k:]}
    for route, extra in (("fit_forecast", {}), ("cross_validation", {"n_windows": 2, "step_size": 4})):
        body = {key: value for key, value in late.items()} | extra
        if route == "cross_validation":  # the history's values only: future over them, not H further
            for s in (*body["series"], *later["series"]):
                s["future"] = {"promo": s["future"]["promo"][: len(s["values"])]}
        a = served.client.post(f"/v1/models/{NAME}/{route}", json=body)
        b = served.client.post(f"/v1/models/{NAME}/{route}", json=later | extra)
        assert a.status_code == b.status_code == 200, (route, a.text[:300], b.text[:300])
        if route == "fit_forecast":
            assert a.json()["forecasts"] == b.json()["forecasts"]  # values and timestamps
            assert a.json()["fit"]["windows"] == b.json()["fit"]["windows"]
        else:
            for x, y in zip(a.json()["series"], b.json()["series"], strict=True):
                assert [w["forecast"] for w in x["windows"]] == [w["forecast"] for w in y["windows"]]
                assert [w["timestamps"] for w in x["windows"]] == [w["timestamps"] for w in y["windows"]]
    gap = fit_body(served, n)
    gap["series"][1]["values"][30] = None
    r = served.client.post(f"/v1/models/{NAME}/fit_forecast", json=gap)
    assert r.status_code == 422 and r.json()["error"]["field"] == "series[1].values[30]", r.text
