"""Every protocol feeds the same batcher: requests that arrive by `/v1`, OIP v2 REST and KServe time
series while a session call runs are merged into the next one, and each gets its own rows back."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from tests.app.conftest import engine_of, make_settings, ort_forecast, running_client, wait_for
from tests.app.fakes import GatedSession
from tests.app.metrics_scrape import delta, scrape

L, C = 8, 3


def test_three_protocols_share_one_session_call(toy_repository: Path) -> None:
    rng = np.random.default_rng(5)
    first, v1_window, v2_window, ts_window = rng.normal(0, 1, (4, L, C)).astype(np.float32)
    start = "2024-01-01T00:00:00Z"
    v1_body = {"series": [{"values": v1_window.tolist(), "start": start}]}
    v2_body = {
        "inputs": [{"name": "window", "shape": [1, L, C], "datatype": "FP32", "data": v2_window.tolist()}]
    }
    ts_body = {
        "model": "toy",
        "inputs": [
            {
                "type": "multivariate_time_series",
                "name": "s",
                "series": ts_window.tolist(),
                "frequency": "H",
                "start_timestamp": start,
            }
        ],
        "options": {"horizon": 4},
    }
    settings = make_settings(toy_repository, max_batch_wait_ms=0)
    with running_client(settings) as client, ThreadPoolExecutor(max_workers=4) as pool:
        batcher = engine_of(client).get("toy", 2).batcher
        assert batcher is not None
        session = GatedSession(batcher)
        before = scrape(client)
        blocker = pool.submit(
            client.post, "/v1/models/toy/forecast", json={"series": [{"values": first.tolist()}]}
        )
        wait_for(lambda: session.calls == 1, what="the first request in the session")
        answers = [
            pool.submit(client.post, "/v1/models/toy/forecast", json=v1_body),
            pool.submit(client.post, "/v2/models/toy/infer", json=v2_body),
            pool.submit(client.post, "/v1/timeseries/forecast", json=ts_body),
        ]
        wait_for(lambda: batcher.queued_rows == 3, what="three protocols' rows queued")
        session.gate.set()
        v1, v2, ts = (f.result(10) for f in answers)
        assert blocker.result(10).status_code == 200
        assert (v1.status_code, v2.status_code, ts.status_code) == (200, 200, 200), (
            v1.text,
            v2.text,
            ts.text,
        )
        assert session.calls == 2  # the blocker's call, then one call for the three protocols' rows
        after = scrape(client)
    assert delta(before, after, "rsa_batch_rows_count", model="toy", version="2") == 2
    assert delta(before, after, "rsa_batch_rows_sum", model="toy", version="2") == 4  # 1, then 3 merged
    # each got its own window's forecast back (merging order is arrival order, so compare to a tolerance)
    got = [
        np.array(v1.json()["forecasts"][0]["forecast"], np.float32),
        np.array(v2.json()["outputs"][0]["data"], np.float32).reshape(4, C),
        np.array(ts.json()["outputs"][0]["content"][0]["mean_forecast"], np.float32),
    ]
    expected = ort_forecast(
        toy_repository / "toy" / "2" / "model.onnx", np.stack([v1_window, v2_window, ts_window])
    )
    for mine, reference in zip(got, expected, strict=True):
        np.testing.assert_allclose(mine, reference, rtol=1e-6, atol=1e-6)
    for protocol in ("rsa_v1", "oip_v2", "kserve_timeseries"):
        assert delta(before, after, "rsa_requests_total", protocol=protocol, model="toy", code="200") >= 1, (
            protocol
        )
