"""Forecast timestamps of calendar-frequency models step months, as the data did (the your-own-data
issue: quarterly data stamped 92 days apart drifted off the quarter)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import make_settings, running_client
from tests.app.fakes import ToySpec, write_version

SPECS = (
    ToySpec(name="monthly", frequency="1MS", frequency_seconds=2_629_746),
    ToySpec(name="quarterly", frequency="3MS", frequency_seconds=7_889_238),
    ToySpec(name="yearly", frequency="12MS", frequency_seconds=31_556_952),
    ToySpec(name="quarter-ends", frequency="3ME", frequency_seconds=7_889_238),
)
VALUES = np.ones((8, 3)).tolist()  # L = 8 values, horizon 4


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    repo = tmp_path_factory.mktemp("calendar_repository")
    for spec in SPECS:
        write_version(repo, spec)
    with running_client(make_settings(repo)) as c:
        yield c


@pytest.mark.parametrize(
    ("model", "start", "expected"),
    [
        # 8 values from the start, so the forecast begins 8 steps after it.
        ("monthly", "2019-01-01", ["2019-09-01", "2019-10-01", "2019-11-01", "2019-12-01"]),
        ("quarterly", "2007-07-01", ["2009-07-01", "2009-10-01", "2010-01-01", "2010-04-01"]),
        ("yearly", "2000-01-01", ["2008-01-01", "2009-01-01", "2010-01-01", "2011-01-01"]),
        ("quarter-ends", "2022-03-31", ["2024-03-31", "2024-06-30", "2024-09-30", "2024-12-31"]),
    ],
)
def test_timestamps_land_on_the_calendar(
    client: TestClient, model: str, start: str, expected: list[str]
) -> None:
    r = client.post(f"/v1/models/{model}/forecast", json={"series": [{"values": VALUES, "start": start}]})
    assert r.status_code == 200, r.text
    assert r.json()["forecasts"][0]["timestamps"] == [f"{day}T00:00:00Z" for day in expected]


def test_a_start_off_the_anchor_is_refused_naming_the_field(client: TestClient) -> None:
    r = client.post(
        "/v1/models/quarterly/forecast", json={"series": [{"values": VALUES, "start": "2009-07-15"}]}
    )
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "series[0].start" and error["limit"] == "3MS"
    assert "first day of a month" in error["message"]


def test_the_models_list_says_the_frequency(client: TestClient) -> None:
    info = client.get("/v1/models/quarterly").json()
    assert "3MS" in str(info)
