"""The forecast dispatch answers exactly as FastAPI's routes would: the same requests, to the app and to
the same app without the dispatch, get the same status, headers and bytes; and the dispatch is what
served them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.api import dispatch
from app.api.dispatch import ForecastDispatch
from app.main import create_app
from tests.app.conftest import make_settings, wait_for

KEY = "dispatch-test-key"
GOOD = {"Authorization": f"Bearer {KEY}"}
WINDOW = np.linspace(-1, 1, 8 * 3).reshape(8, 3).round(3).tolist()


def _client(toy_repository: Path, stack: ExitStack, *, with_dispatch: bool) -> TestClient:
    app = create_app(make_settings(toy_repository, api_keys=[SecretStr(KEY)], max_series_per_request=3))
    if not with_dispatch:  # the stack is built on the first call: drop it before
        app.user_middleware = [m for m in app.user_middleware if m.cls is not ForecastDispatch]
    client = stack.enter_context(TestClient(app, raise_server_exceptions=False))
    wait_for(lambda: client.get("/readyz").status_code == 200, what="/readyz 200")
    return client


@pytest.fixture(scope="module")
def clients(toy_repository: Path) -> Iterator[tuple[TestClient, TestClient]]:
    with ExitStack() as stack:
        yield (
            _client(toy_repository, stack, with_dispatch=True),
            _client(toy_repository, stack, with_dispatch=False),
        )


def _series(n: int = 1, **extra: Any) -> dict[str, Any]:
    return {"series": [{"id": f"s{i}", "values": WINDOW, **extra} for i in range(n)]}


CASES: list[tuple[str, str, dict[str, str], Any]] = [
    ("latest version", "/v1/models/toy/forecast", GOOD, _series()),
    ("a version", "/v1/models/toy/versions/1/forecast", GOOD, _series(2)),
    ("a horizon and a start", "/v1/models/toy/forecast", GOOD, {**_series(start="2020-01-01"), "horizon": 2}),
    ("no key", "/v1/models/toy/forecast", {}, _series()),
    ("a wrong key", "/v1/models/toy/forecast", {"Authorization": "Bearer nope"}, _series()),
    ("another scheme", "/v1/models/toy/forecast", {"Authorization": f"Basic {KEY}"}, _series()),
    ("an unknown model", "/v1/models/nope/forecast", GOOD, _series()),
    ("an unknown version", "/v1/models/toy/versions/9/forecast", GOOD, _series()),
    ("version 0 (FastAPI's 422)", "/v1/models/toy/versions/0/forecast", GOOD, _series()),
    ("a version that is no number", "/v1/models/toy/versions/x/forecast", GOOD, _series()),
    ("too many series", "/v1/models/toy/forecast", GOOD, _series(4)),
    ("too short a window", "/v1/models/toy/forecast", GOOD, {"series": [{"values": WINDOW[:3]}]}),
    ("a bool in the values", "/v1/models/toy/forecast", GOOD, {"series": [{"values": [[True, 1, 1]] * 8}]}),
    ("malformed JSON", "/v1/models/toy/forecast", GOOD, b'{"series": ['),
    ("an empty body", "/v1/models/toy/forecast", GOOD, b""),
    ("a horizon too long", "/v1/models/toy/forecast", GOOD, {**_series(), "horizon": 99}),
    ("not JSON", "/v1/models/toy/forecast", {**GOOD, "Content-Type": "text/plain"}, b"1,2,3"),
]


@pytest.mark.parametrize(("what", "path", "headers", "body"), CASES, ids=[c[0] for c in CASES])
def test_same_answer_with_and_without_the_dispatch(
    clients: tuple[TestClient, TestClient],
    monkeypatch: pytest.MonkeyPatch,
    what: str,
    path: str,
    headers: dict[str, str],
    body: Any,
) -> None:
    taken: list[str] = []  # the dispatch's first step; FastAPI's routes check keys through app.api.deps
    check = dispatch.check_api_key
    monkeypatch.setattr(dispatch, "check_api_key", lambda *args: (taken.append(path), check(*args))[1])
    fast, plain = clients
    kwargs: dict[str, Any] = {"headers": headers}
    kwargs["content" if isinstance(body, bytes) else "json"] = body
    if isinstance(body, bytes) and "Content-Type" not in headers:
        kwargs["headers"] = {**headers, "Content-Type": "application/json"}
    a, b = fast.post(path, **kwargs), plain.post(path, **kwargs)
    assert (a.status_code, a.content) == (b.status_code, b.content), what
    for header in ("content-type", "www-authenticate", "retry-after"):
        assert a.headers.get(header) == b.headers.get(header), (what, header)
    left_to_fastapi = "/versions/0/" in path or "/versions/x/" in path
    assert taken == ([] if left_to_fastapi else [path]), what


def test_other_methods_and_paths_are_left_to_fastapi(clients: tuple[TestClient, TestClient]) -> None:
    fast, plain = clients
    for method, path in (("GET", "/v1/models/toy/forecast"), ("POST", "/v1/models/toy/forecasts")):
        a, b = fast.request(method, path, headers=GOOD), plain.request(method, path, headers=GOOD)
        assert (a.status_code, a.content) == (b.status_code, b.content)
        assert a.status_code in (404, 405)


def test_the_metrics_label_the_route_template(clients: tuple[TestClient, TestClient]) -> None:
    fast, _ = clients
    assert fast.post("/v1/models/toy/versions/2/forecast", json=_series(), headers=GOOD).status_code == 200
    text = fast.get("/metrics").text
    assert 'endpoint="/v1/models/{name}/versions/{version}/forecast"' in text
    assert 'model="toy"' in text and 'version="2"' in text
