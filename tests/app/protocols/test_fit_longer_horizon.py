"""Issue 45, item 12: a horizon above the model's H. `/forecast` refuses it saying what to do instead (ask
for at most H, train a model of that horizon, or, for a refittable global read-out, fit_forecast at that
horizon); `fit_forecast` serves it by the read-out fitted at that horizon, which equals the exporter's
fit at that horizon on the same histories, and refuses to publish it (the graph forecasts H steps). The
service and model are tests/app/protocols/test_fit_forecast.py's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from export.global_models.model import fit_global
from tests.app.protocols.test_fit_forecast import Served, body, histories, published, served
from tests.utils.panel import HORIZON, NAME

__all__ = ["published", "served"]

LONGER = HORIZON + 6


def test_a_forecast_above_h_is_refused_saying_what_to_do(served: Served) -> None:
    r = served.post(f"/v1/models/{NAME}/versions/1/forecast", body(histories(1), horizon=LONGER))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "horizon" and error["limit"] == HORIZON, error
    message = error["message"]
    assert f"ask for at most {HORIZON}" in message, message
    assert f"python -m export.panel train --horizon {LONGER}" in message, message
    assert f'/v1/models/{NAME}/fit_forecast with "horizon": {LONGER}' in message, message
    # Version 2 keeps no refit settings (exported before the `readout` block): no fit_forecast to offer.
    r = served.post(f"/v1/models/{NAME}/versions/2/forecast", body(histories(1), horizon=LONGER))
    assert r.status_code == 422 and "fit_forecast" not in r.json()["error"]["message"], r.text


def test_fit_forecast_serves_a_horizon_above_h_by_the_fit_at_it(served: Served) -> None:
    series = histories()
    r = served.post(f"/v1/models/{NAME}/versions/1/fit_forecast", body(series, horizon=LONGER))
    assert r.status_code == 200, r.text
    answer = r.json()["forecasts"]
    config = replace(served.model.config, horizon=LONGER)
    want = fit_global(series, config, served.model.input_length).forecast(series)
    got = np.array([f["forecast"] for f in answer])[:, :, 0]
    assert got.shape == (3, LONGER)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert len(answer[0]["timestamps"]) == LONGER
    # The first H steps are not the fit at H's: each horizon is its own regression.
    at_h = served.post(f"/v1/models/{NAME}/versions/1/fit_forecast", body(series)).json()["forecasts"]
    assert not np.allclose(np.array(at_h[0]["forecast"])[:, 0], got[0, :HORIZON])


def test_a_horizon_above_what_the_series_can_fit_or_publish_is_refused(served: Served) -> None:
    series = histories()  # the longest: 60 values
    r = served.post(f"/v1/models/{NAME}/versions/1/fit_forecast", body(series, horizon=500))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "horizon" and "send longer series" in error["message"], error
    most = error["limit"]
    assert (
        served.post(f"/v1/models/{NAME}/versions/1/fit_forecast", body(series, horizon=most)).status_code
        == 200
    )
    r = served.post(
        f"/v1/models/{NAME}/versions/1/fit_forecast",
        body(series, horizon=LONGER, publish={"model": "longer"}),
    )
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "publish" and "leave publish out" in error["message"], error
