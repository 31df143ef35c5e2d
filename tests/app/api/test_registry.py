"""The protocol registry (app/protocols/registry.py): a protocol is its package plus one registry line.

The toy protocol (tests/app/api/toy_protocol.py) is registered here beside the service's own, and from
that line alone it is routed, answers errors in its own shape, carries its own metrics label and has
its model route admitted before the body is read; the other protocols are untouched by it. And every
route of the service belongs to a protocol or to the service's own paths, so none falls to /v1's error
shape and an empty label by accident.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.errors import Overloaded
from app.main import create_app
from app.protocols.registry import PROTOCOLS, REGISTRY, SERVICE_PATHS, Registry
from app.protocols.rsa_v1.protocol import RSA_V1
from tests.app.api.toy_protocol import PREDICT, TOY, ToyHandlers
from tests.app.conftest import make_settings, running_client, runtime_of
from tests.app.metrics_scrape import delta, scrape

WITH_TOY = Registry((*PROTOCOLS, TOY), service_errors=RSA_V1.errors)  # the one line a protocol adds


@pytest.fixture(scope="module")
def toy_client(toy_repository: Path) -> Iterator[TestClient]:
    with running_client(make_settings(toy_repository), protocols=WITH_TOY) as client:
        yield client


def test_a_registered_protocol_is_routed_to_its_handlers(toy_client: TestClient) -> None:
    r = toy_client.post("/toy/models/toy/predict", json={"scale": 2})
    assert r.status_code == 200, r.text
    assert r.json() == {"model": "toy", "version": 2, "scale": 2.0}
    assert toy_client.get("/toy/models/toy").json()["version"] == 2
    document = toy_client.get("/openapi.json").json()
    assert PREDICT in document["paths"] and "ToyRequest" in document["components"]["schemas"]


def test_its_errors_come_in_its_own_shape(toy_client: TestClient) -> None:
    r = toy_client.post("/toy/models/nope/predict", json={"scale": 2})
    assert (r.status_code, r.json()["toy_error"]) == (404, "model_not_found")
    r = toy_client.post("/toy/models/toy/predict", json={"scale": "big"})
    assert (r.status_code, r.json()["toy_error"]) == (400, "invalid_input")
    r = toy_client.get("/toy/no/such/route")  # under its prefix, unrouted: still its shape
    assert (r.status_code, r.json()["toy_error"]) == (404, "http_error")
    handlers = runtime_of(toy_client).handlers_of(ToyHandlers)
    handlers.unexpected = True
    try:
        r = toy_client.post("/toy/models/toy/predict", json={"scale": 2})
    finally:
        handlers.unexpected = False
    assert (r.status_code, r.json()["toy_error"]) == (500, "internal_error")


def test_the_other_protocols_keep_their_shapes_beside_it(toy_client: TestClient) -> None:
    assert isinstance(toy_client.get("/v2/models/nope").json()["error"], str)  # OIP v2
    assert toy_client.get("/v1/models/nope").json()["error"]["code"] == "model_not_found"  # /v1
    assert set(toy_client.get("/v1/timeseries/nope").json()["error"]) == {"code", "message", "param", "type"}
    assert toy_client.get("/nope").json()["error"]["code"] == "not_found"  # the service's own: /v1's


def test_its_requests_carry_its_metrics_label(toy_client: TestClient) -> None:
    before = scrape(toy_client)
    assert toy_client.post("/toy/models/toy/predict", json={"scale": 1}).status_code == 200
    assert toy_client.get("/nope").status_code == 404
    after = scrape(toy_client)
    ok = {"endpoint": PREDICT, "protocol": "toy", "model": "toy", "version": "2", "code": "200"}
    assert delta(before, after, "rsa_requests_total", **ok) == 1
    assert delta(before, after, "rsa_requests_total", endpoint="unmatched", protocol="", code="404") == 1


def test_its_probes_are_counted_but_not_timed(toy_client: TestClient) -> None:
    before = scrape(toy_client)
    assert toy_client.get("/toy/health").json() == {"ok": True}
    after = scrape(toy_client)
    probe = {"endpoint": "/toy/health", "protocol": "toy"}
    assert delta(before, after, "rsa_requests_total", code="200", **probe) == 1
    assert delta(before, after, "rsa_request_duration_seconds_count", **probe) == 0


def test_its_model_route_is_admitted_before_the_body_is_read(
    toy_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = runtime_of(toy_client).service
    admitted: list[tuple[Any, ...]] = []
    refuse = False

    async def admit_early(name: str, version: int | None, body_bytes: int | None, binary: bool) -> None:
        admitted.append((name, version, body_bytes, binary))
        if refuse:
            raise Overloaded("too much", retry_after_s=1)

    monkeypatch.setattr(service, "admit_early", admit_early)
    body = b'{"scale": 1}'
    headers = {"content-type": "application/json"}
    assert toy_client.post("/toy/models/toy/predict", content=body, headers=headers).status_code == 200
    assert toy_client.get("/toy/models/toy").status_code == 200  # not an admitted route
    assert admitted == [("toy", None, len(body), False)]
    refuse = True
    r = toy_client.post("/toy/models/toy/predict", content=body, headers=headers)
    assert (r.status_code, r.json()["toy_error"], r.headers["retry-after"]) == (503, "overloaded", "1")


def test_without_its_line_the_protocol_does_not_exist(client: TestClient) -> None:
    r = client.post("/toy/models/toy/predict", json={"scale": 1})
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")  # the service's own shape
    assert REGISTRY.protocol_of(PREDICT) == ""


def _paths(routes: list[Any]) -> Iterator[str]:
    """Every route's path, through the included routers (FastAPI keeps each as one entry that holds
    the router it included)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _paths(included.routes)
        else:
            yield route.path


def test_every_route_belongs_to_a_protocol_or_to_the_service() -> None:
    paths = list(_paths(create_app().routes))
    assert "/v1/models/{name}/forecast" in paths and "/ui/static" in paths  # the walk finds them all
    unowned = [
        path
        for path in paths
        if REGISTRY.protocol_for(path) is None
        and not any(path == own or path.startswith(own + "/") for own in SERVICE_PATHS)
    ]
    assert unowned == [], "routes under no registered protocol: add a ProtocolSpec, or to SERVICE_PATHS"


def test_the_longest_prefix_owns_a_path() -> None:
    assert {
        path: REGISTRY.protocol_of(path)
        for path in (
            "/v1/models/{name}/forecast",
            "/v1/timeseries/forecast",
            "/v2",
            "/v2/health/ready",
            "/v20",
        )
    } == {
        "/v1/models/{name}/forecast": "rsa_v1",
        "/v1/timeseries/forecast": "kserve_timeseries",
        "/v2": "oip_v2",
        "/v2/health/ready": "oip_v2",
        "/v20": "",
    }


def test_names_and_prefixes_are_distinct() -> None:
    with pytest.raises(ValueError, match="distinct"):
        Registry((*PROTOCOLS, TOY, TOY), service_errors=RSA_V1.errors)
