"""The README's interoperability examples work as printed: the tritonclient snippet against a real service
on the shipped model (only the port is this test's), and the KServe time-series curl request, whose numbers
are the README's `/v1` example answer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import numpy as np

from tests.app.conftest import make_settings, running_client
from tests.app.live import live_service

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


def _block(lang: str, marker: str) -> str:
    return next(b for b in re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S) if marker in b)


def test_tritonclient_snippet_works_as_printed(tmp_path: Path) -> None:
    code = _block("python", "tritonclient.http")
    with live_service(ROOT / "model_repository", tmp_path / "service.log") as service:
        host = service.url.removeprefix("http://")
        scope: dict[str, object] = {}
        exec(compile(code.replace("127.0.0.1:8000", host), "README.md", "exec"), scope)
        forecast = scope["forecast"]
        assert (
            isinstance(forecast, np.ndarray) and forecast.dtype == np.float32 and forecast.shape == (2, 96, 7)
        )
        window = scope["window"]
        assert isinstance(window, np.ndarray)
        series = [
            {"values": window[i].tolist(), "start": f"2024-01-01T{hour:02d}:00:00Z"}
            for i, hour in enumerate((0, 12))
        ]
        r = httpx.post(f"{service.url}/v1/models/etth1-rsa/forecast", json={"series": series}, timeout=30)
        assert r.status_code == 200, r.text
        v1 = np.array([f["forecast"] for f in r.json()["forecasts"]], np.float32)
    np.testing.assert_array_equal(forecast, v1)


def test_timeseries_curl_works_as_printed() -> None:
    curl = _block("bash", "/v1/timeseries/forecast")
    path = re.search(r"127\.0\.0\.1:8000(\S+)", curl).group(1)  # type: ignore[union-attr]
    body = json.loads((ROOT / re.search(r"-d @(\S+)", curl).group(1)).read_text())  # type: ignore[union-attr]
    printed = json.loads(_block("json", '"forecasts"'))["forecasts"][0]
    with running_client(make_settings(ROOT / "model_repository")) as client:
        r = client.post(path, json=body)
        # the shipped model has calibrated intervals, which this protocol does not serve yet: a clear 400
        refused = client.post(path, json={**body, "options": {"horizon": 3, "quantiles": [0.1, 0.9]}})
    assert r.status_code == 200, r.text
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "intervals_not_served"
    (content,) = r.json()["outputs"][0]["content"]
    assert content["start_timestamp"] == printed["timestamps"][0].replace("+00:00", "Z")
    np.testing.assert_allclose(content["mean_forecast"], printed["forecast"], atol=1e-4)
