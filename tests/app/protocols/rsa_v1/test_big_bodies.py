"""Big bodies are parsed off the event loop on every `/v1` route that takes a body (issue 46, item 3): a
56 MB body to fit_forecast, cross_validation or detect_anomalies was parsed on the loop, where it froze
every other request (/healthz included) for about 2 s, even though it was then refused.

Each case sends a body of tens of MB (built here) with the parse process on (RSA_PARSE_PROCESS_MIN_BYTES
1 MiB) and holds the worker's parse at a gate: the test wraps `ParseProcess.run` so that the function it
runs waits in the worker, before parsing, until the test opens the gate. While it waits, /healthz must
answer, and the big request must still be running: an order, not a time, so no verdict depends on the
machine's load. A route that parses on the loop never reaches the gate: its request finishes first, and
the test says so. After the gate opens, the worker's own answer (a parsed request, or the refusal's
errors) must be final: the loop never parses the body again, for the model's errors either."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from app.core.offload import ParseProcess
from app.protocols.parsing import Refusal
from tests.app.conftest import make_settings, running_client
from tests.app.fakes import write_repository
from tests.utils.panel import NAME, publish, store

L, C = 8, 3
MB = 1024 * 1024
GATE_S = 120.0  # a bound on waiting only (a hung test): never reached when the route behaves


def gated_call(folder: str, fn: Callable[..., Any], *args: Any) -> Any:
    """In the worker: say so (its pid), wait for the gate, then run `fn` (the route's own parser)."""
    gate = Path(folder)
    (gate / f"started-{os.getpid()}").write_text("")
    deadline = time.monotonic() + GATE_S
    while not (gate / "open").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return fn(*args)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ "toy" (L = 8, three channels) and "stores" (a refittable global read-out, tests/utils/panel.py)."""
    repo, _ = publish(tmp_path_factory.mktemp("big_bodies"))
    return write_repository(repo, versions=(1,))


# Both services' limits, so that the 60 x 1,500-value fit answers on either whatever else the machine runs:
# the default fit budget (10 s) and deadline are wall-clock, and under load (2026-12-05: a bench beside
# two test workers) the two answers differed in status.
GENEROUS: dict[str, Any] = {
    "max_series_per_request": 64,
    "max_fit_seconds": 300.0,
    "request_timeout_s": 300.0,
}


@pytest.fixture(scope="module")
def plain(repository: Path) -> Iterator[TestClient]:
    """The same models, every body parsed on the event loop (no parse process): the reference."""
    with running_client(make_settings(repository, **GENEROUS)) as client:
        yield client


@pytest.fixture(scope="module")
def gated(
    repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, Path, list[Any]]]:
    """The app with its parse process, every parse in it held at the gate folder's `open` file; and the
    answers the worker gave (what `ParseProcess.run` returned to the route)."""
    gate = tmp_path_factory.mktemp("gate")
    answers: list[Any] = []
    real = ParseProcess.run

    async def run(self: ParseProcess, fn: Callable[..., Any], *args: Any) -> Any:
        answer = await real(self, partial(gated_call, str(gate), fn), *args)
        answers.append(answer)
        return answer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ParseProcess, "run", run)
        settings = make_settings(repository, parse_process_min_bytes=MB, **GENEROUS)
        with running_client(settings) as client:
            yield client, gate, answers


def rows(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(10, 3, (n, C))


def body(route: str, size: int, flaw: str | None = None) -> bytes:
    """A body of at least `size` bytes for `route`: series of 50,000 rows, as many as it takes."""
    n = 50_000
    count = size // (n * C * 18) + 1  # 18 to 19 bytes a value as orjson writes these floats
    series: list[dict[str, Any]] = [
        {"id": f"s{i}", "values": rows(n, i), "start": "2020-01-01T00:00:00Z"} for i in range(count)
    ]
    if flaw == "string":  # the model's error, deep in the last series
        series[-1]["values"] = rows(n, 99).tolist()
        series[-1]["values"][-1][-1] = "x"
    if flaw == "zone":  # a start the fast lane leaves to the model (a zone name)
        series[0]["start"] = "2020-01-01T00:00:00[Europe/Berlin]"
    document: dict[str, Any] = {"series": series}
    if route == "forecast" and flaw == "zone":
        document["horizon"] = 99  # past the model's horizon: a 422 after a parse by the model
    raw = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    assert len(raw) >= size
    return raw


# route, flaw, the answer once the gate opens (status, error field)
CASES = [
    ("cross_validation", None, 200, None),
    ("detect_anomalies", None, 422, "level"),  # the toy has no intervals to flag by
    ("fit_forecast", None, 422, "version"),  # the toy cannot be refit
    ("cross_validation", "string", 422, None),  # the schema's error, from the worker
    ("fit_forecast", "string", 422, None),
    ("detect_anomalies", "string", 422, None),
    ("attention", "string", 422, None),
    ("forecast", "zone", 422, "horizon"),  # the fast lane declines; the model parses it, in the worker
]


@pytest.mark.parametrize(("route", "flaw", "status", "field"), CASES)
def test_healthz_answers_while_a_big_body_is_parsed(
    gated: tuple[TestClient, Path, list[Any]], route: str, flaw: str | None, status: int, field: str | None
) -> None:
    client, gate, answers = gated
    (gate / "open").unlink(missing_ok=True)
    for started in gate.glob("started-*"):
        started.unlink()
    answers.clear()
    raw = body(route, 20 * MB, flaw)
    if route == "attention":  # one series
        document = orjson.loads(raw)
        raw = orjson.dumps({"series": document["series"][-1]})
        assert len(raw) >= MB
    headers = {"content-type": "application/json"}
    with ThreadPoolExecutor(1) as pool:
        big = pool.submit(client.post, f"/v1/models/toy/{route}", content=raw, headers=headers)
        try:
            # Until the worker holds the body, or the request is over (parsed on the loop: the failure).
            deadline = time.monotonic() + GATE_S
            while not any(gate.glob("started-*")) and not big.done() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not big.done(), (
                f"/v1/models/toy/{route} answered {big.result().status_code} without handing its "
                f"{len(raw) / MB:.0f} MB body to the parse process: parsed on the event loop"
            )
            assert any(gate.glob("started-*")), "the body never reached the parse process"
            (worker,) = gate.glob("started-*")
            assert worker.name != f"started-{os.getpid()}"  # another process
            health = client.get("/healthz")
            assert health.status_code == 200
            assert not big.done()  # /healthz answered while the big body waited in the parse process
        finally:
            (gate / "open").write_text("")
        r = big.result()
    assert r.status_code == status, r.text[:500]
    if field is not None:
        assert r.json()["error"]["field"] == field, r.text[:500]
    if flaw == "string":
        error = r.json()["error"]
        assert error["field"].endswith("[1]") or error["field"].endswith("[2]"), error
        assert error["field"].startswith("series"), error
    # The worker's answer was final: a request or the refusal's errors, never "parse it again on the loop".
    assert answers and all(a is not None for a in answers), answers
    for answer in answers:  # and a request came back with arrays: millions of floats took the loop longer
        if not isinstance(answer, Refusal):
            assert all(isinstance(v, np.ndarray) for v in values_of(answer)), type(answer)


def values_of(request: Any) -> Iterator[Any]:
    items = request.series if isinstance(request.series, list) else [request.series]
    for s in items:
        yield from s.values.values() if isinstance(s.values, dict) else [s.values]


@pytest.mark.parametrize("route", ["cross_validation", "fit_forecast", "forecast"])
def test_a_refusal_from_the_parse_process_reads_as_the_loops(
    gated: tuple[TestClient, Path, list[Any]], plain: TestClient, route: str
) -> None:
    """The same invalid body, parsed in the worker and on the loop (an app without the parse process):
    the same 422, word for word (field, limit, message, details)."""
    client, gate, answers = gated
    (gate / "open").write_text("")
    answers.clear()
    document = orjson.loads(body(route, 2 * MB, "string"))
    document["series"][0]["values"][3] = [1.0, None, True]  # more errors, of other kinds
    document["horizon"] = "3"
    raw = orjson.dumps(document)
    headers = {"content-type": "application/json"}
    in_worker = client.post(f"/v1/models/toy/{route}", content=raw, headers=headers)
    assert [type(a) for a in answers] == [Refusal]  # refused in the worker, not parsed again here
    on_loop = plain.post(f"/v1/models/toy/{route}", content=raw, headers=headers)
    assert in_worker.status_code == on_loop.status_code == 422, in_worker.text[:300]
    assert in_worker.json() == on_loop.json()


def stores_body(null: bool = False, rows: bool = False) -> bytes:
    """60 monthly histories of 1,500 values (long decimals: over 1 MiB), for "stores" to refit."""
    series = []
    for i in range(60):
        values: list[Any] = (store(i, 1500) + np.random.default_rng(i).uniform(0, 1e-3, 1500)).tolist()
        if null and i == 59:
            values[700] = None
        series.append(
            {"id": f"s{i}", "start": "1900-01-01", "values": [[v] for v in values] if rows else values}
        )
    raw = orjson.dumps({"series": series, "level": [80]})
    assert len(raw) >= MB
    return raw


def toy_body(route: str, null: bool = False, columns: bool = False) -> bytes:
    """Histories of the toy (three channels), over 1 MiB: rows or named columns, maybe a null."""
    series: list[dict[str, Any]] = []
    for i in range(4):
        values: Any = rows(24_000 if route == "attention" else 12_000, i).tolist()
        if null:
            values[-3][1] = None  # in the last window: filled by the model's rule, as on the loop
        if columns:
            values = {name: [r[c] for r in values] for c, name in enumerate(("HUFL", "MUFL", "OT"))}
        series.append({"id": f"s{i}", "values": values, "start": "2020-01-01T00:00:00Z"})
    document: dict[str, Any] = {"series": series[0] if route == "attention" else series}
    if route == "cross_validation":
        document["n_windows"] = 3
    if route == "forecast" and null:
        document["series"][0]["values"] = values  # a null: the fast lane declines, the model parses it
    raw = orjson.dumps(document)
    assert len(raw) >= MB
    return raw


SAME = [
    (NAME, "fit_forecast", lambda: stores_body()),
    (NAME, "fit_forecast", lambda: stores_body(rows=True)),
    (NAME, "fit_forecast", lambda: stores_body(null=True)),  # 422: the null's position, as on the loop
    ("toy", "cross_validation", lambda: toy_body("cross_validation")),
    ("toy", "cross_validation", lambda: toy_body("cross_validation", null=True, columns=True)),
    ("toy", "attention", lambda: toy_body("attention", columns=True)),
    ("toy", "forecast", lambda: toy_body("forecast", null=True)),
]


@pytest.mark.parametrize(("model", "route", "make"), SAME)
def test_a_big_body_parsed_in_the_worker_is_answered_as_on_the_loop(
    gated: tuple[TestClient, Path, list[Any]],
    plain: TestClient,
    model: str,
    route: str,
    make: Callable[[], bytes],
) -> None:
    """Values back from the worker as arrays (null: NaN) answer exactly as the loop's lists do."""
    client, gate, answers = gated
    (gate / "open").write_text("")
    answers.clear()
    raw = make()
    headers = {"content-type": "application/json"}
    in_worker = client.post(f"/v1/models/{model}/{route}", content=raw, headers=headers)
    assert answers and not isinstance(answers[-1], Refusal)  # parsed there, into arrays
    assert all(isinstance(v, np.ndarray) for v in values_of(answers[-1]))
    on_loop = plain.post(f"/v1/models/{model}/{route}", content=raw, headers=headers)
    assert in_worker.status_code == on_loop.status_code, (in_worker.text[:300], on_loop.text[:300])
    got, want = in_worker.json(), on_loop.json()
    for answer in (got, want):
        (answer.get("fit") or {}).pop("seconds", None)  # the fit's own time
    assert got == want
