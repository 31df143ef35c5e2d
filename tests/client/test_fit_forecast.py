"""`Client.fit_forecast` against a real service process serving a global model: a long frame in, the
/v1 fit_forecast answer for the same histories as a long frame out (intervals as columns), a refit
published with an API key, and a refused request raised naming its series."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
from rsa_client import Client, ServiceError

from tests.app.live import LiveService, live_service
from tests.utils.panel import NAME, publish, store

KEY = "client-fit-key"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveService, Path]]:
    folder = tmp_path_factory.mktemp("client-fit")
    repo, _ = publish(folder)
    env = {"RSA_API_KEYS": KEY, "RSA_MODEL_CONTROL": "explicit"}
    with live_service(repo, folder / "service.log", **env) as service:
        yield service, repo


def long_frame(lengths: dict[str, int]) -> pd.DataFrame:
    parts = []
    for i, (sid, n) in enumerate(lengths.items()):
        stamps = pd.date_range("2016-01-01", periods=n, freq="MS")
        parts.append(pd.DataFrame({"unique_id": sid, "ds": stamps, "y": store(400 + i, n)}))
    return pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=0)  # the client sorts


def test_fit_forecast_is_the_routes_answer_as_a_long_frame(served: tuple[LiveService, Path]) -> None:
    service, repo = served
    frame = long_frame({"a": 300, "b": 64})
    with Client(service.url, api_key=KEY) as client:
        # the target under a name of its own (target_col), the forecast named after the model
        sales = frame.rename(columns={"y": "sales"})
        out = client.fit_forecast(sales, h=4, level=[80], model=NAME, target_col="sales")
    body = {
        "series": [
            {"id": sid, "start": "2016-01-01T00:00:00+00:00", "values": rows.sort_values("ds")["y"].tolist()}
            for sid, rows in frame.groupby("unique_id", sort=True)
        ],
        "horizon": 4,
        "level": [80],
    }
    answer = httpx.post(
        f"{service.url}/v1/models/{NAME}/fit_forecast", json=body, headers={"Authorization": f"Bearer {KEY}"}
    ).json()
    assert list(out.columns) == ["unique_id", "ds", NAME, f"{NAME}-lo-80", f"{NAME}-hi-80"]
    want = np.array([row[0] for f in answer["forecasts"] for row in f["forecast"]])
    np.testing.assert_array_equal(out[NAME].to_numpy(), want)
    np.testing.assert_array_equal(
        out[f"{NAME}-hi-80"].to_numpy(), [row[0] for f in answer["forecasts"] for row in f["hi-80"]]
    )
    assert out["ds"].iloc[0] == pd.Timestamp("2041-01-01")  # 300 months after 2016-01, naive as sent
    assert out.attrs["fit"]["levels"] == [80]
    assert not (repo / NAME / "2").exists()  # nothing published unless asked


def test_fit_forecast_keeps_the_frames_id_type(served: tuple[LiveService, Path]) -> None:
    service, _ = served
    frame = long_frame({"a": 120, "b": 90}).replace({"unique_id": {"a": 3, "b": 5}})
    frame["unique_id"] = frame["unique_id"].astype("int64")
    with Client(service.url, api_key=KEY) as client:
        out = client.fit_forecast(frame, h=2, model=NAME)
        named = client.forecast(frame, h=2, model=NAME)
    assert out["unique_id"].dtype == named["unique_id"].dtype == np.int64
    assert out["unique_id"].tolist() == named["unique_id"].tolist() == [3, 3, 5, 5]


def test_fit_forecast_publishes_and_names_refused_series(served: tuple[LiveService, Path]) -> None:
    service, repo = served
    with Client(service.url, api_key=KEY) as client:
        out = client.fit_forecast(long_frame({"a": 120}), model=NAME, publish=NAME)
        assert out.attrs["fit"]["published"] == {"model": NAME, "version": 2}
        assert (repo / NAME / "2" / "model.onnx").exists()
        with pytest.raises(ServiceError) as caught:
            client.fit_forecast(long_frame({"tiny": 5}), model=NAME)
    assert caught.value.status == 422 and caught.value.series == ["tiny"]
    assert "min_history" in caught.value.message
