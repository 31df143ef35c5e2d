"""The interoperability examples (docs/protocols.md, linked from the README) work as printed: the
tritonclient snippet against a real service on the shipped model (only the port is this test's), its
forecast and 80% interval outputs `/v1`'s, and the KServe time-series curl request, whose mean forecast
and quantiles are the README's `/v1` example answer's `forecast`, `lo-80` and `hi-80`, as the page says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import numpy as np
import tritonclient.http as httpclient

from tests.app.conftest import make_settings, running_client
from tests.app.live import live_service

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
PROTOCOLS = (ROOT / "docs" / "protocols.md").read_text()


def _block(lang: str, marker: str) -> str:
    blocks = re.findall(rf"```{lang}\n(.*?)```", README + PROTOCOLS, flags=re.S)
    return next(b for b in blocks if marker in b)


def test_tritonclient_snippet_works_as_printed(tmp_path: Path) -> None:
    code = _block("python", "tritonclient.http")
    with live_service(ROOT / "model_repository", tmp_path / "service.log") as service:
        host = service.url.removeprefix("http://")
        scope: dict[str, object] = {}
        exec(compile(code.replace("127.0.0.1:8000", host), "docs/protocols.md", "exec"), scope)
        for value in scope.values():  # the snippet's client, closed here rather than collected elsewhere
            if isinstance(value, httpclient.InferenceServerClient):
                value.close()
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
        body = {"series": series, "level": [80]}
        r = httpx.post(f"{service.url}/v1/models/etth1-rsa/forecast", json=body, timeout=30)
        assert r.status_code == 200, r.text
    for name, key in (("forecast", "forecast"), ("lo_80", "lo-80"), ("hi_80", "hi-80")):
        v1 = np.array([f[key] for f in r.json()["forecasts"]], np.float32)
        np.testing.assert_array_equal(scope[name], v1, err_msg=name)


def test_timeseries_curl_works_as_printed() -> None:
    curl = _block("bash", "/v1/timeseries/forecast")
    path = re.search(r"127\.0\.0\.1:8000(\S+)", curl).group(1)  # type: ignore[union-attr]
    body = json.loads((ROOT / re.search(r"-d @(\S+)", curl).group(1)).read_text())  # type: ignore[union-attr]
    printed = json.loads(_block("json", '"forecasts"'))["forecasts"][0]
    assert body["options"]["quantiles"] == [0.1, 0.9]  # the 80% interval's bounds, as the README says
    with running_client(make_settings(ROOT / "model_repository")) as client:
        r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    (content,) = r.json()["outputs"][0]["content"]
    assert content["start_timestamp"] == printed["timestamps"][0].replace("+00:00", "Z")
    assert content["start_timestamp"] in PROTOCOLS  # the page names it
    np.testing.assert_allclose(content["mean_forecast"], printed["forecast"], atol=1e-4)
    assert list(content["quantiles"]) == ["0.1", "0.9"]
    np.testing.assert_allclose(content["quantiles"]["0.1"], printed["lo-80"], atol=1e-4)
    np.testing.assert_allclose(content["quantiles"]["0.9"], printed["hi-80"], atol=1e-4)
