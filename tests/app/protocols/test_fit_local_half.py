"""One short series and a hybrid: the exporter's intervals and the fit on request's come from the local
half's errors where the held-out windows reach no 80% (app/artifacts/readout/calibration.py
`local_half_calibration`), by one rule: a fit on the series the model was trained on answers the
forecast and the intervals /v1's forecast does, and says what the widths were calibrated on."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from export.global_models.config import PanelConfig
from export.global_models.onnx import calibrate_global, export_global
from export.global_models.search import train_global
from tests.app.conftest import make_settings, running_client
from tests.export.test_panel import seasonal_panel

H, LEVELS = 18, [80.0, 90.0]


def test_a_lone_short_series_gets_the_same_local_half_intervals_from_the_export_and_a_fit(
    tmp_path: Path,
) -> None:
    v = seasonal_panel(1, seed=3, lengths=(48, 49))[0]  # one held-out window: 50% only from it
    model = train_global([v], PanelConfig(horizon=H, period=12), "1MS", local=True)
    intervals, said = calibrate_global(model, [v], LEVELS)
    assert intervals is not None and intervals["calibration"]["scored"] == "local_half", said
    export_global(model, tmp_path, "lone", intervals=intervals)
    body = {"series": [{"id": "a", "start": "2020-01-01", "values": v.tolist()}], "level": [80, 90]}
    with running_client(make_settings(tmp_path, models=["lone"])) as client:
        served = client.post("/v1/models/lone/forecast", json=body)
        fitted = client.post("/v1/models/lone/fit_forecast", json=body)
        longer = client.post(
            "/v1/models/lone/fit_forecast",
            json={
                **body,
                "series": [{"id": "b", "values": seasonal_panel(1, seed=4, lengths=(90, 91))[0].tolist()}],
            },
        )
    assert served.status_code == 200 and fitted.status_code == 200, (served.text, fitted.text)
    fit = fitted.json()["fit"]
    assert fit["calibrated_on"] == "local_half" and fit["calibration_windows"] == 48 - 24 - H + 1
    assert fit["levels"] == [80, 90]
    a, b = served.json()["forecasts"][0], fitted.json()["forecasts"][0]
    for key in ("forecast", "lo-80", "hi-80", "lo-90", "hi-90"):
        np.testing.assert_allclose(np.asarray(b[key]), np.asarray(a[key]), rtol=1e-5, atol=1e-3)
    assert longer.status_code == 200, longer.text
    assert longer.json()["fit"]["calibrated_on"] == "held_out"  # 90 values hold out windows enough
