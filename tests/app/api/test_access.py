"""Access through HTTP: API keys on every endpoint but the probes, and documentation that works offline."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest
from pydantic import SecretStr

from tests.app.conftest import make_settings, running_client
from tests.app.metrics_scrape import delta, scrape

KEY = "s3cr3t-key-for-tests"
BODY = {"series": [{"values": np.ones((8, 3)).tolist()}]}


def test_api_keys_guard_everything_but_probes(toy_repository: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    settings = make_settings(toy_repository, api_keys=[SecretStr(KEY)])
    with running_client(settings) as client:  # /readyz answers without a key (running_client polls it)
        for open_path in ("/healthz", "/readyz", "/metrics"):
            assert client.get(open_path).status_code == 200, open_path
        before = scrape(client)
        good = {"Authorization": f"Bearer {KEY}"}
        bad = {"Authorization": "Bearer not-the-key"}
        for method, path, body in [
            ("GET", "/v1/models", None),
            ("GET", "/v1/models/toy", None),
            ("POST", "/v1/models/toy/forecast", BODY),
            ("POST", "/v1/models/toy/versions/1/attention", {"series": BODY["series"][0]}),
            ("GET", "/docs", None),
            ("GET", "/openapi.json", None),
        ]:
            r = client.request(method, path, json=body)
            assert r.status_code == 401, (path, r.text)
            assert r.json()["error"]["code"] == "unauthenticated"
            assert r.headers["www-authenticate"].startswith("Bearer")
            r = client.request(method, path, json=body, headers=bad)
            assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden"), path
            assert client.request(method, path, json=body, headers=good).status_code == 200, path
        after = scrape(client)
    assert delta(before, after, "rsa_request_rejections_total", reason="unauthorized") == 12
    assert KEY not in caplog.text and "not-the-key" not in caplog.text


def test_docs_work_offline(client) -> None:  # type: ignore[no-untyped-def]
    page = client.get("/docs")
    assert page.status_code == 200
    sources = re.findall(r"""(?:src|href)=["']([^"']+)""", page.text) + re.findall(
        r"""url:\s*['"]([^'"]+)""", page.text
    )
    assert sources and all(s.startswith("/") for s in sources), sources  # nothing from another host
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"):
        r = client.get(f"/docs/static/{asset}")
        assert r.status_code == 200 and len(r.content) > 500, asset
    assert "cdn" not in page.text.lower()
    assert client.get("/openapi.json").json()["info"]["title"] == "RSA forecasting service"
    assert client.get("/redoc").status_code == 404  # ReDoc loads from a CDN: not offered


def test_early_admission_answers_only_clients_with_a_key(toy_repository: Path) -> None:
    """A saturated version refuses before the body is read; without a valid key that refusal must not
    happen (nor reveal the load): the request gets its 401/403 as usual."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.app.conftest import engine_of, wait_for
    from tests.app.fakes import GatedSession

    settings = make_settings(toy_repository, api_keys=[SecretStr(KEY)], max_batch_rows=1, max_batch_wait_ms=0)
    url = "/v1/models/toy/versions/2/forecast"
    good = {"Authorization": f"Bearer {KEY}"}
    with running_client(settings) as client, ThreadPoolExecutor(max_workers=1) as pool:
        batcher = engine_of(client).get("toy", 2).batcher
        assert batcher is not None
        session = GatedSession(batcher)
        busy = pool.submit(client.post, url, json=BODY, headers=good)
        wait_for(lambda: session.calls == 1, what="a request in the session")
        batcher.row_seconds = 100.0  # measured drain: the backlog alone cannot clear in time
        assert client.post(url, json=BODY).status_code == 401
        assert client.post(url, json=BODY, headers={"Authorization": "Bearer nope"}).status_code == 403
        refused = client.post(url, json=BODY, headers=good)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "overloaded"
        session.gate.set()
        assert busy.result(10).status_code == 200
