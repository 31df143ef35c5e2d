"""The fast lane reads what the model reads, or steps aside; the answer encoder writes pydantic's bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from app.protocols.rsa_v1.schemas import ForecastRequest, ForecastResponse, SeriesForecast
from app.protocols.rsa_v1.wire import (
    NO_START,
    ForecastArgs,
    ForecastResult,
    encode_forecast,
    fast_forecast,
    parse_forecast,
)

MAX_SERIES = 4

# Numbers as JSON writes them, with the awkward ones: ints, big and tiny floats, ones past float32.
numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -0.0, 1e-320, 1.7976931348623157e308, 3.5e38, 2**53 + 1]),
)
# What may stand where a number belongs: mostly numbers, now and then a bool, null, string or list.
cells = st.one_of(
    numbers, numbers, numbers, numbers, st.booleans(), st.none(), st.just("1.0"), st.just([1.0])
)


@st.composite
def rows(draw: st.DrawFn) -> list[list[object]]:
    width = draw(st.integers(1, 3))
    n = draw(st.integers(0, 4))
    ragged = draw(st.booleans()) and n > 1
    out = [[draw(cells) for _ in range(width)] for _ in range(n)]
    if ragged:
        out[-1] = out[-1] + [1.0]
    return out


@st.composite
def columns(draw: st.DrawFn) -> dict[str, object]:
    names = draw(st.lists(st.sampled_from(["a", "b", "OT"]), min_size=0, max_size=3, unique=True))
    n = draw(st.integers(0, 3))
    return {name: [draw(cells) for _ in range(n)] for name in names}


@st.composite
def series(draw: st.DrawFn) -> dict[str, object]:
    item: dict[str, object] = {"values": draw(st.one_of(rows(), columns(), st.none(), st.just("x")))}
    if draw(st.booleans()):
        item["id"] = draw(st.one_of(st.text(max_size=8), st.just("true"), st.just("x" * 257), st.none()))
    if draw(st.booleans()):
        item["start"] = draw(
            st.sampled_from(
                ["2018-02-13T00:00:00", "2018-02-13", "2018-02-13T00:00:00+05:30", "nope", 1518480000, None]
            )
        )
    if draw(st.integers(0, 9)) == 0:
        item["extra"] = 1
    if draw(st.integers(0, 9)) == 0:
        del item["values"]
    return item


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    body: dict[str, object] = {"series": draw(st.lists(series(), min_size=0, max_size=MAX_SERIES + 1))}
    if draw(st.booleans()):
        body["horizon"] = draw(st.one_of(st.integers(-1, 5), st.just(2.0), st.just(True), st.none()))
    return json.dumps(body).encode()  # Python's json writes NaN/inf never here (numbers are finite)


def _same(fast: ForecastArgs, model: ForecastRequest) -> None:
    assert fast.horizon == model.horizon
    assert len(fast.series) == len(model.series)
    for ours, theirs in zip(fast.series, model.series, strict=True):
        assert (ours.id, ours.start) == (theirs.id, theirs.start)
        if isinstance(theirs.values, dict):
            assert isinstance(ours.values, dict) and list(ours.values) == list(theirs.values)
            for name, column in theirs.values.items():
                np.testing.assert_array_equal(ours.values[name], np.array(column, np.float64))
        else:
            assert isinstance(ours.values, np.ndarray) and ours.values.dtype == np.float64
            np.testing.assert_array_equal(ours.values, np.array(theirs.values, np.float64))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_the_fast_lane_reads_what_the_model_reads_or_steps_aside(raw: bytes) -> None:
    fast = fast_forecast(raw, MAX_SERIES)
    try:
        model = ForecastRequest.model_validate_json(raw, context={"max_series": MAX_SERIES})
    except ValidationError:
        assert fast is None, "the fast lane accepted a body the model refuses"
        return
    if fast is not None:
        _same(fast, model)


def test_the_usual_body_takes_the_fast_lane() -> None:
    rng = np.random.default_rng(0)
    body = {
        "series": [
            {"id": "a", "values": rng.normal(size=(5, 3)).tolist(), "start": "2018-02-13T00:00:00"},
            {"values": {"OT": [1, 2, 3]}, "id": None},
        ],
        "horizon": 2,
    }
    parsed = parse_forecast(json.dumps(body).encode(), MAX_SERIES)
    assert isinstance(parsed, ForecastArgs)
    _same(parsed, ForecastRequest.model_validate(body))


@pytest.mark.parametrize(
    "body",
    [
        b'{"series": [{"values": [[1.0, true]]}]}',
        b'{"series": [{"values": {"OT": [false, 1.0]}}]}',
        b'{"series": [{"values": [[1.0, NaN]]}]}',
        b'{"series": [{"values": [[1e400]]}]}',
        b'{"series": [{"values": [[1.0]]}, {"values": [[1.0]]}, {"values": [[1]]}, {"values": [[1]]},'
        b' {"values": [[1]]}]}',
    ],
)
def test_bad_bodies_get_the_models_errors(body: bytes) -> None:
    assert fast_forecast(body, MAX_SERIES) is None
    with pytest.raises(ValidationError):
        parse_forecast(body, MAX_SERIES)


def test_ragged_rows_go_to_the_model_whose_codec_names_the_row() -> None:
    body = b'{"series": [{"values": [[1.0], [1.0, 2.0]]}]}'
    assert fast_forecast(body, MAX_SERIES) is None
    assert isinstance(parse_forecast(body, MAX_SERIES), ForecastRequest)


def test_a_body_of_many_us_is_handed_to_the_model_without_scanning_it_all() -> None:
    body = b'{"series": [{"values": [[1.0]], "id": "' + b"u" * 100 + b'"}]}'
    assert fast_forecast(body, MAX_SERIES) is None  # over the search budget: the model's lane
    assert isinstance(parse_forecast(body, MAX_SERIES), ForecastRequest)


@pytest.mark.parametrize(
    "tz", [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-1, seconds=-1))]
)
def test_the_answer_is_pydantics_json_with_exact_float32_numbers(tz: timezone) -> None:
    """Every field as pydantic writes it (key order included), and each forecast number in a form that
    reads back as exactly the float32 the model returned, in no more characters than that takes."""
    rng = np.random.default_rng(1)
    outputs = (rng.normal(size=(3, 4, 2)) * 10.0 ** rng.integers(-30, 30, (3, 4, 2))).astype(np.float32)
    start = datetime(2018, 2, 13, 0, 0, 0, 500, tzinfo=tz)
    stamps = [[start + timedelta(hours=k) for k in range(4)], None, [start] * 4]
    ids = ["a", None, 'quote " and \u00e9']
    result = ForecastResult("m", 2, "CPUExecutionProvider", ["x", "y"], ids, outputs, stamps)
    expected = ForecastResponse(
        model="m",
        version=2,
        provider="CPUExecutionProvider",
        forecasts=[
            SeriesForecast.model_construct(
                id=ids[i],
                forecast=outputs[i].tolist(),
                channels=["x", "y"],
                timestamps=stamps[i],
                **({"timestamps_note": NO_START} if stamps[i] is None else {}),
            )
            for i in range(3)
        ],
    )
    ours = json.loads(encode_forecast(result))
    theirs = json.loads(ForecastResponse.__pydantic_serializer__.to_json(expected))
    for i, series in enumerate(ours["forecasts"]):
        written = np.array(series["forecast"], dtype=np.float64).astype(np.float32)
        np.testing.assert_array_equal(written, outputs[i])
        assert np.allclose(series.pop("forecast"), theirs["forecasts"][i].pop("forecast"), rtol=1e-7, atol=0)
    assert json.dumps(ours) == json.dumps(theirs)  # the rest identical, key order included
    # float32's shortest digits, not the widened double's 17: the answer is smaller than pydantic's
    assert len(encode_forecast(result)) < len(ForecastResponse.__pydantic_serializer__.to_json(expected))
