"""Schemathesis against the app's own OpenAPI document: no 5xx, and every response as documented.

One app, lifespan run and every version ready: the fake models of `tests/app/fakes.py`, "toy" (versions 1
and 2), "hourly", "daily" and "weekly" (seasonal cycles) and "plain". Requests go through its TestClient,
in process, on the event loop where the lifespan runs the batchers (schemathesis's own ASGI transport
would start a second lifespan on a loop of its own). Two generators:

- `test_openapi_fuzz`: schemathesis's own cases for every operation (schema examples, the coverage phase,
  then positive and negative fuzzing), checked with schemathesis's response checks. Random model names
  would make every model route a 404, so a hook swaps in a served name (and version) for about half.
- `test_valid_windows`: random JSON never holds exactly L rows of C finite numbers, so a Hypothesis
  strategy builds forecast and attention requests the models accept (rows or named columns, up to
  MAX_SERIES series, extreme and subnormal values, any UTC offset), or that break exactly one rule of
  the data plane or a limit; the same checks validate each answer, whose status must also be the one
  predicted (200, 404, 413 or 422).

`test_times_at_the_ends_of_the_calendar` sends starts within two days of year 1's start or year 9999's
end (naive, any offset, maybe a `[Zone]` suffix) to every operation with a series `start`, forecast,
attention, cross_validation, detect_anomalies and fit_forecast, on a UTC and an Asia/Tokyo model (a 500
before issue 46). `test_attention_png` adds the PNG answers for sure; `test_generated_case_count` asserts
the total (at least 1,000 cases) once the generators have run. Each bug it found is a test at the end,
its smallest reproduction (a strict xfail until the app was fixed).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.main import create_app
from tests.app.conftest import make_settings, running_client
from tests.app.fakes import intervals_block, write_cycle_repository, write_repository

if TYPE_CHECKING:  # conftest imports it with Starlette's httpx deprecation warning silenced
    import httpx
    from fastapi.testclient import TestClient

# What the fake repositories serve (write_repository: "toy" 1 and 2; write_cycle_repository: the rest,
# all but "plain" with a seasonal cycle, so they need `start`). Every model has L=8, C=3 (these
# channels), H=4 and one layer; the `served` fixture checks this against GET /v1/models.
VERSIONS = {"toy": (1, 2), "hourly": (1,), "daily": (1,), "weekly": (1,), "plain": (1,)}
CYCLE_MODELS = frozenset({"hourly", "daily", "weekly"})
L, H, CHANNELS, N_LAYERS = 8, 4, ("HUFL", "MUFL", "OT"), 1
# Lowered limits, so that requests cross them cheaply; with batches of 8 rows, a request of up to
# MAX_SERIES series is split over several session calls and merged back.
MAX_SERIES, MAX_HISTORY, BATCH_ROWS, MAX_BODY_BYTES = 24, 40, 8, 64 * 1024

FLOAT32_MAX = float(np.finfo(np.float32).max)
# Window values may go up to the float32 maximum. Past the app's input bound (about sqrt(FLOAT32_MAX / L)
# / 2) it answers 422, and a model that overflows below it also gets a 422 (non_finite_result), never a
# null. Below LARGE no model here can overflow, so a 200 is required.
LARGE = 1e15

# positive_data_acceptance is left out on purpose: the schema cannot state L, C, the horizon or which
# models exist (per-model limits, checked by the data plane), so schema-valid data is rightly a 404 or a
# 422. test_valid_windows predicts those statuses instead.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

# An app built without settings reads and loads nothing; its document is the one the running app
# serves (test_schema_is_the_served_one). Loaded at import: schemathesis parametrizes at collection.
OPENAPI: dict[str, Any] = create_app().openapi()
SCHEMA = schemathesis.openapi.from_dict(OPENAPI)
MODEL_OPERATIONS = (
    "POST /v1/models/{name}/forecast",
    "POST /v1/models/{name}/versions/{version}/forecast",
    "POST /v1/models/{name}/attention",
    "POST /v1/models/{name}/versions/{version}/attention",
)

# per operation, plus the explicit (coverage) cases; parameterless ones stop early. 4,822 cases in all at 60
# (2026-12-06: 120, as until then, took about 40 s more of the suite on the 2-core machine).
FUZZ_EXAMPLES = 60
WINDOW_EXAMPLES = 110  # per model operation
MIN_CASES = 1000

# (test, operation) -> status -> responses, for test_generated_case_count.
SENT: defaultdict[tuple[str, str], Counter[int]] = defaultdict(Counter)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    repository = tmp_path_factory.mktemp("schemathesis_repository")
    write_repository(repository)
    write_cycle_repository(repository)
    settings_ = make_settings(
        repository,
        max_series_per_request=MAX_SERIES,
        max_history_length=MAX_HISTORY,
        max_batch_rows=BATCH_ROWS,
        max_body_bytes=MAX_BODY_BYTES,
    )
    with running_client(settings_) as client:
        # The strategies below are written for this catalogue: fail here, plainly, if the fakes change.
        models = client.get("/v1/models").json()["models"]
        shapes = {
            m["name"]: {
                v["version"]: (v["input_length"], v["horizon"], tuple(v["channels"]), len(v["layers"]))
                for v in m["versions"]
            }
            for m in models
        }
        assert shapes == {name: dict.fromkeys(v, (L, H, CHANNELS, N_LAYERS)) for name, v in VERSIONS.items()}
        assert {m["name"] for m in models if m["versions"][0]["cycle"]} == CYCLE_MODELS
        yield client


def operation(label: str) -> schemathesis.APIOperation:
    method, path = label.split(" ", 1)
    return SCHEMA[path][method]


def _case(label: str, body: dict[str, Any], **kwargs: Any) -> schemathesis.Case:
    return operation(label).Case(body=body, media_type="application/json", **kwargs)


def _window(value: float) -> list[list[float]]:
    return [[value] * len(CHANNELS) for _ in range(L)]


def call(client: TestClient, case: schemathesis.Case, test: str) -> httpx.Response:
    """Send the case through the TestClient, count it and run the checks (a FailureGroup says which
    failed, with a curl line). Schemathesis serialises for `requests`: raw bytes are httpx's `content`."""
    kwargs = case.as_transport_kwargs(base_url=str(client.base_url))
    kwargs.pop("cookies", None)  # the schema has none; httpx deprecates per-request cookies
    if "data" in kwargs:
        kwargs["content"] = kwargs.pop("data")
    response: httpx.Response = client.request(**kwargs)
    SENT[(test, case.operation.label)][response.status_code] += 1
    case.validate_response(response, checks=CHECKS)
    return response


# -- schemathesis's own cases ----------------------------------------------------------------------------


def served_path_parameters(context: schemathesis.HookContext, path_parameters: Any) -> Any:
    """Half of the cases get a served model name and, where the fuzzer drew a valid version, one the model
    has. Only valid values are replaced, by valid ones, so negative cases stay negative."""
    if not isinstance(path_parameters, dict) or not isinstance(path_parameters.get("name"), str):
        return st.just(path_parameters)
    version = path_parameters.get("version")
    keep_version = "version" not in path_parameters or not (isinstance(version, int) and version >= 1)

    def with_name(name: str) -> st.SearchStrategy[dict[str, Any]]:
        if keep_version:
            return st.just({**path_parameters, "name": name})
        return st.sampled_from(VERSIONS[name]).map(lambda v: {**path_parameters, "name": name, "version": v})

    served_case = st.sampled_from(sorted(VERSIONS)).flatmap(with_name)
    return st.one_of(st.just(path_parameters), served_case)


@SCHEMA.hooks.apply(served_path_parameters, name="flatmap_path_parameters")
@SCHEMA.parametrize()
@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
def test_openapi_fuzz(case: schemathesis.Case, served: TestClient) -> None:
    call(served, case, "fuzz")


# -- well-shaped windows ---------------------------------------------------------------------------------

# At most one rule of the data plane broken per request (None: none), so that the answer is predictable.
SERIES_FLAWS = ("short", "too_long", "wide_row", "too_large", "no_start", "oversized")
FORECAST_FLAWS = (*SERIES_FLAWS, "horizon", "too_many_series", "repeated_id")
ATTENTION_FLAWS = (*SERIES_FLAWS, "channel", "layer")


# Values of one request: most keep to ordinary magnitudes (with signed zeros and float64 and float32
# subnormals), so that most requests are answered; one in four may hold anything up to the float32
# maximum, past the app's input bound.
SMALL_VALUES = st.one_of(
    st.floats(-1e4, 1e4), st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1e-45, -1.1754944e-38, 1e-300])
)
ANY_VALUES = st.one_of(
    SMALL_VALUES,
    st.floats(-1e17, 1e17),
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.sampled_from([1e17, -1e19, FLOAT32_MAX]),
)


@st.composite
def starts(draw: st.DrawFn) -> str:
    """Any instant from year 1 to 9999, naive (UTC by the API's rule) or with an explicit offset."""
    offset = timezone(timedelta(minutes=draw(st.integers(-(24 * 60 - 1), 24 * 60 - 1))))
    start = draw(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
    return (
        start.replace(tzinfo=offset).isoformat().replace("+00:00", draw(st.sampled_from(["", "Z", "+00:00"])))
    )


def series(draw: st.DrawFn, flaw: str | None, values: st.SearchStrategy[float]) -> dict[str, Any]:
    n = {"short": L - 1, "too_long": MAX_HISTORY + 1}.get(flaw or "", draw(st.integers(L, L + 4)))
    rows = draw(st.lists(st.lists(values, min_size=3, max_size=3), min_size=n, max_size=n))
    if flaw == "wide_row":
        rows[draw(st.integers(0, n - 1))].append(1.0)
    if flaw == "too_large":  # in the window (the last L points; the history before it is not read)
        big = draw(st.sampled_from([FLOAT32_MAX, -3.5e38, 1e39, 1.7976931348623157e308]))
        rows[draw(st.integers(n - L, n - 1))][draw(st.integers(0, 2))] = big
    if flaw == "oversized":  # a body over MAX_BODY_BYTES: 413 before anything is parsed
        # A row takes at least 12 bytes of JSON: "[0.0,0.0,0.0]," or, as columns, "0.0," three times.
        rows = rows * (MAX_BODY_BYTES // 12 // n + 1)
    out: dict[str, Any] = {}
    if flaw == "wide_row" or draw(st.booleans()):
        out["values"] = rows
    else:
        out["values"] = {name: [row[c] for row in rows] for c, name in enumerate(CHANNELS)}
    if draw(st.booleans()):
        out["id"] = draw(st.text(max_size=16))
    if flaw != "no_start":
        out["start"] = draw(starts())
    return out


@dataclass(frozen=True)
class WindowCase:
    case: schemathesis.Case
    flaw: str | None
    known: bool  # the model and version exist
    large: bool  # a window value above LARGE: the input bound or an overflow may refuse it

    def expected(self) -> set[int]:
        name = self.case.path_parameters["name"]
        flawed = self.flaw is not None and not (self.flaw == "no_start" and name not in CYCLE_MODELS)
        if self.flaw == "oversized":
            return {413}
        if not self.known:
            return {404, 422} if flawed else {404}  # which one first is the app's choice
        if flawed:
            return {422}
        return {200, 422} if self.large else {200}


@st.composite
def window_cases(draw: st.DrawFn, label: str) -> WindowCase:
    attention = label.endswith("/attention")
    flaws = ATTENTION_FLAWS if attention else FORECAST_FLAWS
    flaw = draw(st.sampled_from((None,) * len(flaws) + flaws))  # half of the requests are flawless
    name = draw(st.sampled_from(sorted(VERSIONS)))
    path_parameters: dict[str, Any] = {"name": name}
    known = True
    if "{version}" in label:
        version = draw(st.sampled_from([*VERSIONS[name], *VERSIONS[name], 3]))  # 3: no model has it
        path_parameters["version"] = version
        known = version in VERSIONS[name]
    query: dict[str, Any] = {}
    values = draw(st.sampled_from([SMALL_VALUES, SMALL_VALUES, SMALL_VALUES, ANY_VALUES]))
    if attention:
        body: dict[str, Any] = {"series": series(draw, flaw, values)}
        sent = [body["series"]]
        if draw(st.booleans()):
            body["matrices"] = draw(
                st.lists(st.sampled_from(["softmax", "rem", "mixed"]), min_size=1, max_size=3)
            )
        if flaw == "channel":
            body["channel"] = draw(st.sampled_from([-1, len(CHANNELS), "x"]))
        elif draw(st.booleans()):
            body["channel"] = draw(st.one_of(st.integers(0, len(CHANNELS) - 1), st.sampled_from(CHANNELS)))
        if draw(st.booleans()):
            body["average_heads"] = draw(st.booleans())
        if flaw == "layer":  # out of range, or named twice
            body["layers"] = [0, draw(st.sampled_from([-1, N_LAYERS, 0]))]
        elif draw(st.booleans()):
            body["layers"] = list(range(N_LAYERS))
        # Where to ask for the format, and which. A PNG takes matplotlib about a second here, so few ask
        # (test_attention_png does for sure). Weights by repetition: Hypothesis's small integers are
        # far from uniform.
        where, fmt = draw(st.sampled_from(["default"] * 8 + ["body", "query"])), "json"
        if where != "default":
            fmt = draw(st.sampled_from(["json", "json", "png"]))
        if where == "body":
            body["format"] = fmt
        elif where == "query":
            query["format"] = fmt
    else:
        counts = [1, 1, 2, 3, MAX_SERIES]
        count = MAX_SERIES + 1 if flaw == "too_many_series" else draw(st.sampled_from(counts))
        if flaw == "repeated_id":
            count = max(count, 2)
        # One series carries the flaw; the others are fine.
        body = {"series": [series(draw, flaw if i == 0 else None, values) for i in range(count)]}
        for i, one in enumerate(body["series"]):  # an id names its answer: unique within a request
            if "id" in one:
                one["id"] = f"{i}.{one['id']}"
        if flaw == "repeated_id":
            body["series"][0]["id"] = body["series"][-1]["id"] = draw(st.text(max_size=16))
        if flaw == "horizon":
            body["horizon"] = draw(st.sampled_from([H + 1, H + 100]))
        elif draw(st.booleans()):
            body["horizon"] = draw(st.integers(1, H))
        sent = body["series"]
    large = any(abs(x) > LARGE for s in sent for x in _window_numbers(s["values"]))
    case = operation(label).Case(
        path_parameters=path_parameters, body=body, query=query, media_type="application/json"
    )
    return WindowCase(case, flaw, known, large)


def _window_numbers(values: list[list[float]] | dict[str, list[float]]) -> Iterator[float]:
    """The values of the last L points, the only ones the model reads."""
    if isinstance(values, dict):
        return (x for column in values.values() for x in column[-L:])
    return (x for row in values[-L:] for x in row)


WINDOW_SETTINGS = settings(
    max_examples=WINDOW_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@pytest.mark.parametrize("label", MODEL_OPERATIONS)
@WINDOW_SETTINGS
@given(data=st.data())
def test_valid_windows(label: str, served: TestClient, data: st.DataObject) -> None:
    window = data.draw(window_cases(label))
    response = call(served, window.case, "windows")
    assert response.status_code in window.expected(), (window.flaw, response.text[:300])


@pytest.mark.parametrize("label", MODEL_OPERATIONS[2:])
@pytest.mark.parametrize("where", ["body", "query"])
def test_attention_png(label: str, where: str, served: TestClient) -> None:
    """The PNG answer through the same checks (its content type is documented); few random cases ask for
    one, since matplotlib takes about a second each here."""
    body: dict[str, Any] = {"series": {"values": _window(0.5), "start": "2018-02-13T00:00:00Z"}}
    query = {"format": "png"} if where == "query" else {}
    if where == "body":
        body["format"] = "png"
    path_parameters = {"name": "hourly", "version": 1} if "{version}" in label else {"name": "hourly"}
    response = call(served, _case(label, body, path_parameters=path_parameters, query=query), "png")
    assert response.status_code == 200
    assert response.content.startswith(b"\x89PNG")


# -- times at the ends of the calendar, on every route that takes a body ----------------------------------

# Every `/v1` operation with a series `start` (the evaluation and fit routes beside forecast and attention).
START_OPERATIONS = (
    *MODEL_OPERATIONS,
    "POST /v1/models/{name}/cross_validation",
    "POST /v1/models/{name}/versions/{version}/cross_validation",
    "POST /v1/models/{name}/detect_anomalies",
    "POST /v1/models/{name}/versions/{version}/detect_anomalies",
    "POST /v1/models/{name}/fit_forecast",
    "POST /v1/models/{name}/versions/{version}/fit_forecast",
)
START_EXAMPLES = 50  # per operation
ZONES = ("Asia/Tokyo", "America/New_York", "Pacific/Kiritimati", "Etc/GMT+12", "UTC")
EDGE_LEVELS = [80.0, 95.0]


@pytest.fixture(scope="module")
def zoned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """ "toy" (UTC) and "tokyo" (Asia/Tokyo, with intervals, so that detect_anomalies reads its starts)."""
    from tests.app.fakes import ToySpec, write_version

    repository = write_repository(tmp_path_factory.mktemp("zoned_repository"), versions=(1,))
    widths = np.sort(np.random.default_rng(5).uniform(0.1, 2.0, (len(EDGE_LEVELS), H, len(CHANNELS))), axis=0)
    intervals = intervals_block(EDGE_LEVELS, widths)
    write_version(
        repository,
        ToySpec(name="tokyo", manifest_overrides={"timezone": "Asia/Tokyo", "intervals": intervals}),
    )
    with running_client(make_settings(repository, max_series_per_request=MAX_SERIES)) as client:
        yield client


@st.composite
def edge_starts(draw: st.DrawFn) -> str:
    """A time within two days of year 1's start or year 9999's end: naive, with any offset, and maybe a
    `[Zone]` suffix, so that reading it in UTC, in the model's zone or in the suffix's may leave the years."""
    low = draw(st.booleans())
    bounds = (
        (datetime(1, 1, 1), datetime(1, 1, 3))
        if low
        else (datetime(9999, 12, 29), datetime(9999, 12, 31, 23, 59))
    )
    when = draw(st.datetimes(min_value=bounds[0], max_value=bounds[1]))
    text = when.isoformat()
    if draw(st.booleans()):
        minutes = draw(st.integers(-(24 * 60 - 1), 24 * 60 - 1))
        text = when.replace(tzinfo=timezone(timedelta(minutes=minutes))).isoformat()
    if draw(st.booleans()):
        text += f"[{draw(st.sampled_from(ZONES))}]"
    return text


@st.composite
def start_cases(draw: st.DrawFn, label: str) -> schemathesis.Case:
    path_parameters: dict[str, Any] = {"name": draw(st.sampled_from(["toy", "tokyo", "tokyo", "absent"]))}
    if "{version}" in label:
        path_parameters["version"] = 1
    start = draw(edge_starts())
    if label.endswith("/attention"):
        body: dict[str, Any] = {"series": {"values": _window(1.0), "start": start}}
    elif label.endswith("/forecast"):
        body = {"series": [{"values": _window(1.0), "start": start}]}
    else:  # a history long enough for a backtest, a check or a fit's windows
        values = [[float(i % 5), 1.0, 2.0] for i in range(L + 2 * H)]
        body = {"series": [{"values": values, "start": start}]}
    return _case(label, body, path_parameters=path_parameters)


@pytest.mark.parametrize("label", START_OPERATIONS)
@settings(
    max_examples=START_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_times_at_the_ends_of_the_calendar(label: str, zoned: TestClient, data: st.DataObject) -> None:
    """No start is a 500 (issue 46: `astimezone` overflowed past year 9999 or before year 1 in the model's
    zone, or in a `[Zone]` suffix's while parsing): a start refused is a 422 naming the field."""
    case = data.draw(start_cases(label))
    response = call(zoned, case, "edge_starts")
    assert response.status_code in (200, 404, 422), response.text[:300]
    if response.status_code == 422 and "start" in response.text:
        error = response.json()["error"]
        if error["field"] is not None and error["field"].endswith("start"):
            assert error["field"] in ("series[0].start", "series.start"), error


# -- bookkeeping -----------------------------------------------------------------------------------------


def test_schema_is_the_served_one(served: TestClient) -> None:
    assert served.get("/openapi.json").json() == OPENAPI


def _generator_keys(items: list[pytest.Item]) -> set[tuple[str, str]]:
    """The SENT keys of this module's test_openapi_fuzz and test_valid_windows items among `items`."""
    keys = set()
    for item in items:
        if item.path != Path(__file__) or not isinstance(item, pytest.Function):
            continue
        if item.originalname == "test_openapi_fuzz":
            keys.add(("fuzz", getattr(item, "operation_label", "")))
        elif item.originalname == "test_valid_windows":
            keys.add(("windows", item.callspec.params["label"]))
    return keys


def test_generated_case_count(request: pytest.FixtureRequest) -> None:
    """At least MIN_CASES cases in all; every operation reached; served names reached the model routes;
    well-shaped windows were answered 200, not only refused. Counts what this process sent before it.

    Every generator item of this session (under xdist, a worker collects them all and runs the whole
    file: tests/utils/parallel.py) must have sent a case from this process, or this fails: a run that
    passes by sending nothing is impossible. Skips only where the run selected no generator item, or some
    (the totals need them all)."""
    labels = {result.ok().label for result in SCHEMA.get_all_operations()}
    expected = {("fuzz", label) for label in labels} | {("windows", label) for label in MODEL_OPERATIONS}
    selected = _generator_keys(request.session.items)
    if not selected:
        pytest.skip("counts test_openapi_fuzz and test_valid_windows: run the whole module")
    silent = sorted(key for key in selected if sum(SENT[key].values()) == 0)
    assert not silent, f"selected in this session, yet sent no case from this process: {silent}"
    if selected != expected:
        pytest.skip(f"{len(selected)} of the {len(expected)} generator items ran: run the whole module")
    for (test, label), statuses in sorted(SENT.items()):
        print(f"{test:8} {label:52} {sum(statuses.values()):5}  {dict(sorted(statuses.items()))}")
    total = sum(sum(statuses.values()) for statuses in SENT.values())
    print(f"total: {total} cases")
    assert total >= MIN_CASES
    assert SENT[("fuzz", "GET /v1/models/{name}")][200] > 0  # the name hook worked
    for label in MODEL_OPERATIONS:
        # Derandomized, yet the mix differs when the whole suite ran first (seen: 17 to 51 answered per
        # operation, out of 110); a tenth is the floor that still proves the strategy builds real windows.
        assert SENT[("windows", label)][200] >= WINDOW_EXAMPLES // 10, (label, SENT[("windows", label)])


# -- bugs this suite found, each its smallest reproduction, now fixed ----------------------------------------


def test_naive_start_gives_date_time_timestamps(served: TestClient) -> None:
    body = {"series": [{"values": _window(1.0), "start": "2018-02-13T00:00:00"}]}
    call(served, _case(MODEL_OPERATIONS[0], body, path_parameters={"name": "toy"}), "bugs")


def test_openmetrics_content_type_is_documented(served: TestClient) -> None:
    case = operation("GET /metrics").Case(headers={"accept": "application/openmetrics-text; version=1.0.0"})
    call(served, case, "bugs")


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The app with an API key configured (RSA_API_KEYS)."""
    repository = write_repository(tmp_path_factory.mktemp("keyed_repository"))
    with running_client(make_settings(repository, api_keys=["s3cret"])) as client:
        yield client


@pytest.mark.parametrize("authorization", [None, "Bearer wrong"], ids=["no key", "wrong key"])
def test_api_key_refusals_are_documented(authorization: str | None, keyed: TestClient) -> None:
    headers = {"authorization": authorization} if authorization else None
    call(keyed, operation("GET /v1/models").Case(headers=headers), "bugs")
