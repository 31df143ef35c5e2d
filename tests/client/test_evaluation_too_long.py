"""The client and the service's `evaluation_too_long` (issue 46): a backtest or anomaly check the service
refuses as too long for its deadline now (422 naming `n_windows` or `last` and the `limit` that fits)
raises a ServiceError carrying that limit by default; with `on_too_long="shrink"` the client resends
that request once with the limit and the frame says which series were shrunk.

Against the real service in process (its FastAPI app as the client's transport), the refusal driven as
in tests/app/protocols/rsa_v1/test_evaluation_cost_refusal.py: an injected evaluation rate of 25 s a
row against 60% of a 100 s deadline, so two rows fit and three do not, whatever this machine's speed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from rsa_client import Client, ServiceError

from tests.app.conftest import engine_of, make_settings, running_client
from tests.app.fakes import ToySpec, intervals_block, write_version

LEVELS = [50.0, 80.0]
DEADLINE_S = 100.0
ROW_S = 25.0  # two windows (50 s) fit in 60 s, three (75 s) do not
CHANNELS = ["HUFL", "MUFL", "OT"]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    repo = tmp_path_factory.mktemp("too_long")
    block = intervals_block(LEVELS, np.full((len(LEVELS), 4, 3), 1.0))
    write_version(repo, ToySpec(version=1, manifest_overrides={"intervals": block}))
    with running_client(make_settings(repo, request_timeout_s=DEADLINE_S)) as c:
        yield c


@pytest.fixture()
def slow(app: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The toy's evaluation rate set to ROW_S a row; returns the evaluation bodies the service received."""
    batcher = engine_of(app)._batcher("toy", 1)
    monkeypatch.setattr(batcher.evaluation_drain, "row_seconds", ROW_S)
    return []


def client_of(app: TestClient, sent: list[dict[str, Any]]) -> Client:
    """A Client whose requests go to the app in process; the evaluation bodies it sends are kept."""
    client = Client("http://testserver", concurrency=1, max_retries=0)

    def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
        if "json" in kwargs and url.endswith(("cross_validation", "detect_anomalies")):
            sent.append(kwargs["json"])
        return app.request(method, url, **kwargs)

    client.http = type("Routed", (), {"request": staticmethod(request), "close": lambda self: None})()
    return client


def frame(n: int = 20, ids: tuple[str, ...] = ("a",)) -> pd.DataFrame:
    parts = []
    for i, sid in enumerate(ids):
        values = np.random.default_rng(n + i).normal(10, 3, size=(n, 3)).round(3)
        part = pd.DataFrame(values, columns=CHANNELS)
        part.insert(0, "ds", pd.date_range("2024-01-01", periods=n, freq="h"))
        part.insert(0, "unique_id", sid)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def test_a_backtest_too_long_raises_naming_the_windows_that_fit(
    app: TestClient, slow: list[dict[str, Any]]
) -> None:
    client = client_of(app, slow)
    with pytest.raises(ServiceError) as caught:
        client.cross_validation(frame(), h=2, n_windows=3, model="toy")
    e = caught.value
    assert (e.status, e.code, e.field, e.limit) == (422, "evaluation_too_long", "n_windows", 2)
    assert "send n_windows of at most 2" in e.message and "on_too_long='shrink'" in e.message
    assert [b["n_windows"] for b in slow] == [3]  # not resent


def test_shrink_resends_the_backtest_once_with_the_windows_that_fit(
    app: TestClient, slow: list[dict[str, Any]]
) -> None:
    client = client_of(app, slow)
    out = client.cross_validation(frame(), h=2, n_windows=3, model="toy", on_too_long="shrink")
    assert [b["n_windows"] for b in slow] == [3, 2]
    assert out.attrs["shrunk"] == [{"series": "a", "field": "n_windows", "asked": 3, "sent": 2}]
    assert out["cutoff"].nunique() == 2 and len(out) == 2 * 2
    # the last two windows of the three asked: the same as asking for two
    slow.clear()
    two = client.cross_validation(frame(), h=2, n_windows=2, model="toy")
    assert [b["n_windows"] for b in slow] == [2] and two.attrs["shrunk"] == []
    pd.testing.assert_frame_equal(out, two)


def test_shrink_resends_an_anomaly_check_with_the_rows_that_fit(
    app: TestClient, slow: list[dict[str, Any]]
) -> None:
    client = client_of(app, slow)
    with pytest.raises(ServiceError) as caught:
        client.detect_anomalies(frame(), model="toy", last=3)
    assert (caught.value.field, caught.value.limit) == ("last", 2)
    slow.clear()
    out = client.detect_anomalies(frame(), model="toy", last=3, on_too_long="shrink")
    assert [b["last"] for b in slow] == [3, 2]
    assert out.attrs["shrunk"] == [{"series": "a", "field": "last", "asked": 3, "sent": 2}]
    stamps = pd.date_range("2024-01-01", periods=20, freq="h")
    assert list(out["ds"]) == list(stamps[-2:])  # the last two rows checked, the third left out


def test_a_second_refusal_is_raised_not_resent_again(
    app: TestClient, slow: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two series: 4 rows fit at ROW_S / 2, two windows each. The rate doubles before the resend (the
    host got busier), so the resent request is refused too: raised, not shrunk again."""
    batcher = engine_of(app)._batcher("toy", 1)
    monkeypatch.setattr(batcher.evaluation_drain, "row_seconds", ROW_S / 2)
    client = client_of(app, slow)
    send = client._send

    def busier(*args: Any, **kwargs: Any) -> httpx.Response:
        if len(slow) == 1:
            batcher.evaluation_drain.row_seconds = ROW_S * 2  # restored by monkeypatch
        return send(*args, **kwargs)

    monkeypatch.setattr(client, "_send", busier)
    with pytest.raises(ServiceError) as caught:
        client.cross_validation(frame(ids=("a", "b")), h=2, n_windows=3, model="toy", on_too_long="shrink")
    assert [b["n_windows"] for b in slow] == [3, 2]
    assert caught.value.code == "evaluation_too_long" and caught.value.limit == 0


def test_other_refusals_and_bad_options_are_not_resent(app: TestClient, slow: list[dict[str, Any]]) -> None:
    client = client_of(app, slow)
    with pytest.raises(ValueError, match="on_too_long must be 'raise' or 'shrink'"):
        client.cross_validation(frame(), h=2, n_windows=3, model="toy", on_too_long="halve")  # type: ignore[arg-type]
    with pytest.raises(ServiceError) as caught:  # a horizon past the model's: another 422
        client.cross_validation(frame(), h=9, n_windows=1, model="toy", on_too_long="shrink")
    assert caught.value.status == 422 and caught.value.code != "evaluation_too_long"
    assert len(slow) <= 1
