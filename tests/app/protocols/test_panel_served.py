"""A global model served: from a written long CSV (tests/utils/panel.py: train, export through the CLI)
to forecasts of series never seen in training, on each protocol, checked against GlobalModel.forecast
(values) and each series' own calendar (timestamps)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from export.panel import GlobalModel
from tests.app.conftest import make_settings, running_client
from tests.utils.panel import HORIZON, NAME, publish, unseen


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, GlobalModel]]:
    repo, model = publish(tmp_path_factory.mktemp("panel"))
    with running_client(make_settings(repo)) as client:
        yield client, model


def months_after(start: str, n: int, horizon: int) -> list[pd.Timestamp]:
    """The `horizon` month starts after a series of n monthly values from `start`."""
    return list(pd.date_range(start, periods=n + horizon, freq="MS", tz="UTC")[n:])


def expected(model: GlobalModel, horizon: int = HORIZON) -> dict[str, np.ndarray]:
    series = unseen()
    want = model.forecast([v for _, v in series.values()])[:, :horizon]
    return dict(zip(series, want, strict=True))


def test_v1_forecasts_unseen_series_of_any_length_with_their_own_timestamps(
    served: tuple[TestClient, GlobalModel],
) -> None:
    client, model = served
    series = unseen()
    body = {
        "series": [{"id": k, "start": s, "values": v.tolist()} for k, (s, v) in series.items()],
        "horizon": 4,
    }
    r = client.post(f"/v1/models/{NAME}/forecast", json=body)
    assert r.status_code == 200, r.text
    want = expected(model, 4)
    answer = r.json()["forecasts"]
    assert [f["id"] for f in answer] == list(series)
    for f in answer:
        start, values = series[f["id"]]
        assert f["channels"] == ["y"]
        np.testing.assert_allclose(np.array(f["forecast"])[:, 0], want[f["id"]], rtol=1e-4, atol=1e-3)
        assert [pd.Timestamp(t) for t in f["timestamps"]] == months_after(start, len(values), 4)


def test_v1_refuses_a_history_shorter_than_min_history_naming_the_series(
    served: tuple[TestClient, GlobalModel],
) -> None:
    client, model = served
    ok = unseen()["store_new"][1].tolist()
    body = {"series": [{"id": "a", "values": ok}, {"id": "b", "values": ok[: model.min_history - 1]}]}
    r = client.post(f"/v1/models/{NAME}/forecast", json=body)
    assert r.status_code == 422, r.text
    assert "series[1].values" in r.text and f"at least {model.min_history}" in r.text


def test_v1_describes_the_global_model(served: tuple[TestClient, GlobalModel]) -> None:
    client, model = served
    version = client.get(f"/v1/models/{NAME}").json()["versions"][0]
    assert version["kind"] == "global_readout"
    assert version["panel"] == {"min_history": model.min_history, "period": 12}


def test_a_one_channel_wide_model_takes_a_flat_list_as_it_takes_rows(tmp_path: Path) -> None:
    from tests.app.fakes import ToySpec, write_version

    write_version(tmp_path, ToySpec(name="one", channels=("OT",)))
    values = [float(v) for v in np.linspace(1.0, 3.0, 10)]
    with running_client(make_settings(tmp_path)) as client:
        flat = client.post("/v1/models/one/forecast", json={"series": [{"values": values}]})
        rows = client.post("/v1/models/one/forecast", json={"series": [{"values": [[v] for v in values]}]})
        short = client.post("/v1/models/one/forecast", json={"series": [{"values": values[:5]}]})
    assert flat.status_code == rows.status_code == 200, flat.text
    assert flat.json()["forecasts"] == rows.json()["forecasts"]
    assert short.status_code == 422 and "its input length" in short.text  # a wide model: L values
