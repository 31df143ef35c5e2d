"""One rule for zoned times everywhere (issue 46, item 8): a naive time the zone skips (the spring change of
daylight saving) is refused by /v1 as the client, the batch scorer, the exporter and /ui refuse it
(`rsa_core.zones.skipped` agrees with `rsa_core.wallclock.localize`, which they read columns with), and a
zone name that is the host's own (`localtime`) is refused as a model's zone, a training file's and a
request's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.artifacts.manifest import load_manifest
from export.data.errors import DataError
from export.data.options import ReadOptions
from rsa_core.wallclock import localize
from rsa_core.zones import model_zone, skipped
from tests.app.conftest import make_settings, running_client
from tests.app.fakes import ToySpec, write_version

# Zones and stretches of wall-clock time holding their changes: an hour forward and back (Berlin, New
# York), half an hour (Lord Howe), a change at midnight (Sao Paulo, 2018), a whole day skipped (Apia,
# 2011-12-30), and zones without any.
STRETCHES = [
    ("Europe/Berlin", "2023-03-25", "2023-03-27"),
    ("Europe/Berlin", "2023-10-28", "2023-10-30"),
    ("America/New_York", "2023-03-11", "2023-03-13"),
    ("Australia/Lord_Howe", "2023-09-30", "2023-10-02"),
    ("America/Sao_Paulo", "2018-11-03", "2018-11-05"),
    ("Pacific/Apia", "2011-12-29", "2012-01-01"),
    ("Asia/Tokyo", "2023-03-25", "2023-03-27"),
    ("UTC", "2023-03-25", "2023-03-27"),
]


@pytest.mark.parametrize(("zone", "first", "last"), STRETCHES)
def test_the_service_skips_the_times_the_columns_readers_skip(zone: str, first: str, last: str) -> None:
    start, end = datetime.fromisoformat(first), datetime.fromisoformat(last)
    walls = [start + timedelta(minutes=15 * k) for k in range(int((end - start) / timedelta(minutes=15)))]
    _, flagged = localize(np.array(walls, dtype="datetime64[ns]"), zone)
    ours = np.array([skipped(w, ZoneInfo(zone)) for w in walls])
    np.testing.assert_array_equal(ours, flagged)
    changes = zone not in ("Asia/Tokyo", "UTC") and "10-28" not in first  # autumn skips nothing
    assert ours.any() == changes


def test_the_host_zone_is_refused_as_a_zone_everywhere(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"localtime.*differently on each host"):
        model_zone("localtime")
    with pytest.raises(DataError, match="localtime"):
        ReadOptions(timezone="localtime")
    folder = write_version(tmp_path, ToySpec(name="host", manifest_overrides={"timezone": "localtime"}))
    with pytest.raises(Exception, match="localtime"):
        load_manifest(folder / "manifest.json")
    assert model_zone("Europe/Berlin") == ZoneInfo("Europe/Berlin")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    repo = tmp_path_factory.mktemp("zones")
    write_version(repo, ToySpec(name="berlin", manifest_overrides={"timezone": "Europe/Berlin"}))
    write_version(repo, ToySpec(name="plain"))
    with running_client(make_settings(repo)) as c:
        yield c


def forecast(client: TestClient, model: str, start: str) -> tuple[int, dict]:
    values = np.random.default_rng(0).normal(10, 3, size=(8, 3)).round(3).tolist()
    r = client.post(f"/v1/models/{model}/forecast", json={"series": [{"values": values, "start": start}]})
    return r.status_code, json.loads(r.text)


def test_v1_refuses_a_naive_start_the_models_zone_skips(client: TestClient) -> None:
    status, body = forecast(client, "berlin", "2023-03-26T02:30:00")
    assert status == 422, body
    error = body["error"]
    assert error["field"] == "series[0].start" and "skip" in error["message"]
    status, body = forecast(client, "plain", "2023-03-26T02:30:00[Europe/Berlin]")
    assert status == 422 and "skip" in json.dumps(body), body
    for model, start in (
        ("berlin", "2023-03-26T03:30:00"),  # after the change
        ("berlin", "2023-03-26T02:30:00+01:00"),  # an offset names an instant: no wall clock to skip
        ("berlin", "2023-10-29T02:30:00"),  # the autumn repeat: the first of the two
        ("plain", "2023-03-26T02:30:00"),  # a UTC model skips nothing
    ):
        status, body = forecast(client, model, start)
        assert status == 200, (model, start, body)


def test_v1_refuses_the_host_zone_in_a_start(client: TestClient) -> None:
    status, body = forecast(client, "plain", "2023-03-26T02:30:00[localtime]")
    assert status == 422 and "localtime" in json.dumps(body), body
