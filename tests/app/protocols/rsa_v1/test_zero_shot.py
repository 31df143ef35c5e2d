"""`POST /v1/forecast` (issue 47): a forecast without naming a model, answered by the pretrained model of
the series' frequency (`freq`, or each series' `start`), the answer naming it; refusals are 4xx naming
the field, never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from export.global_models.onnx import export_global
from export.pretrained import PretrainedSpec, dataset_record, train_pretrained
from rsa_core.frequency import frequency_name, read_start
from tests.app.conftest import make_settings, running_client
from tests.utils.panel import store

MONTHLY = PretrainedSpec("monthly", "1MS", 12, 6, ())
QUARTERLY = PretrainedSpec("quarterly", "3MS", 4, 4, ())
YEARLY = PretrainedSpec("yearly", "12MS", 1, 4, ())


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository of three pretrained read-outs (monthly, quarterly, yearly; trained on made-up stores)
    and one model that is not pretrained."""
    repo = tmp_path_factory.mktemp("zero_shot_repository")
    series = [store(i, 48 - 3 * (i % 4)) for i in range(12)]
    for spec in (MONTHLY, QUARTERLY, YEARLY):
        model, intervals, _ = train_pretrained(spec, series, local=False)
        export_global(model, repo, spec.name, intervals=intervals, dataset=dataset_record(spec, []))
        if spec is MONTHLY:  # the same model under a name of its own, not pretrained
            export_global(model, repo, "stores", intervals=intervals)
    return repo


@pytest.fixture(scope="module")
def client(repository: Path) -> Iterator[TestClient]:
    with running_client(make_settings(repository)) as c:
        yield c


def monthly_body(**extra: Any) -> dict[str, Any]:
    values = [float(v) for v in store(99, 30)]
    return {"series": [{"id": "shop", "start": "2021-01-01", "values": values}], "level": [80], **extra}


def test_a_monthly_series_with_its_start_is_answered_by_the_pretrained_model(client: TestClient) -> None:
    r = client.post("/v1/forecast", json=monthly_body())
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["model"], got["version"]) == ("pretrained-monthly", 1)
    one = got["forecasts"][0]
    assert one["id"] == "shop" and len(one["forecast"]) == MONTHLY.horizon
    assert one["timestamps"][0].startswith("2023-07-01")  # 30 months from 2021-01
    lo, hi, mid = (np.asarray(one[k], float)[:, 0] for k in ("lo-80", "hi-80", "forecast"))
    assert np.all(lo < mid) and np.all(mid < hi)
    named = client.post("/v1/models/pretrained-monthly/forecast", json=monthly_body()).json()
    assert named["forecasts"] == got["forecasts"]  # the same model, the same answer


@pytest.mark.parametrize("freq", ["QS", "Q", "3MS", "QS-OCT", "QE-DEC"])
def test_freq_picks_the_model_of_that_frequency(client: TestClient, freq: str) -> None:
    r = client.post("/v1/forecast", json=monthly_body(freq=freq))
    assert r.status_code == 200, r.text
    assert r.json()["model"] == "pretrained-quarterly"


def test_a_frequency_without_a_model_is_422_naming_those_with_one(client: TestClient) -> None:
    r = client.post("/v1/forecast", json=monthly_body(freq="H"))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "freq"
    assert "hourly" in error["message"] and "monthly, quarterly, yearly" in error["message"]


@pytest.mark.parametrize("freq", ["B", "C"])
def test_a_business_day_freq_says_to_send_the_days_as_daily(client: TestClient, freq: str) -> None:
    r = client.post("/v1/forecast", json=monthly_body(freq=freq))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert (
        error["field"] == "freq" and "send freq D with null for the days without a value" in error["message"]
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (monthly_body(freq="fortnightly"), "freq"),
        (monthly_body(freq=""), "freq"),
        (monthly_body(freq=12), "freq"),
        (monthly_body(freq="M" * 40), "freq"),
        ({"series": [{"values": [1.0] * 20}]}, "freq"),  # no start, no freq
        ({"series": [{"start": "2021-01-17", "values": [1.0] * 20}]}, "freq"),  # a day of no frequency
        (
            {
                "series": [
                    {"start": "2021-01-01", "values": [1.0] * 20},
                    {"start": "2021-01-01T13:00:00", "values": [1.0] * 20},
                ]
            },
            "series[1].start",
        ),
        ({"series": []}, "series"),
        ({"series": [{"start": "2021-01-01", "values": [1.0, 2.0]}]}, "series[0].values"),  # too short
        # no values, no timestamps, with a start (a schemathesis case that answered 500: an IndexError)
        ({"series": [{"start": "2000-01-01T00:00:00Z", "values": [], "timestamps": []}]}, "series[0].values"),
        ({"series": [{"start": "2000-01-01T00:00:00Z", "values": {}, "timestamps": []}]}, "series[0].values"),
        (monthly_body(horizon=100), "horizon"),
        (monthly_body(level=[42]), "level"),
        (monthly_body(model="stores"), "model"),  # an unknown field
    ],
)
def test_bad_input_is_422_naming_the_field(client: TestClient, body: dict[str, Any], field: str) -> None:
    r = client.post("/v1/forecast", json=body)
    assert r.status_code == 422, r.text
    assert field in (r.json()["error"]["field"] or ""), r.json()


@pytest.mark.parametrize("raw", ["not json", '{"series": [', "[]", "null", '{"freq": "MS"}'])
def test_malformed_bodies_are_4xx(client: TestClient, raw: str) -> None:
    r = client.post("/v1/forecast", content=raw, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, r.text


def test_no_pretrained_model_loaded_is_422_saying_so(repository: Path) -> None:
    with running_client(make_settings(repository, models=["stores"])) as c:
        r = c.post("/v1/forecast", json=monthly_body())
    assert r.status_code == 422, r.text
    assert "none" in r.json()["error"]["message"]


def test_frequency_aliases_and_starts() -> None:
    assert [frequency_name(f) for f in ("MS", "m", "1MS", "YS", "A-DEC", "h", "1h", "W-SUN", "D")] == [
        "monthly",
        "monthly",
        "monthly",
        "yearly",
        "yearly",
        "hourly",
        "hourly",
        "weekly",
        "daily",
    ]
    assert frequency_name("min") is None and frequency_name("ms") is None
    assert read_start(datetime(2020, 3, 1)).assumed == "monthly"
    assert read_start(datetime(2020, 3, 1, 5)).assumed == "hourly"
    assert read_start(datetime(2020, 3, 2)).assumed is None


def test_the_shipped_repository_answers_a_flat_monthly_series_by_its_start() -> None:
    """The done criterion's curl: the shipped pretrained models load, and a flat monthly series with its
    start and no model name is forecast with intervals by pretrained-monthly; each model's frequency
    answers by its `freq`."""
    shipped = Path(__file__).resolve().parents[4] / "model_repository"
    names = sorted(p.name for p in shipped.glob("pretrained-*"))
    assert {
        "pretrained-monthly",
        "pretrained-quarterly",
        "pretrained-yearly",
        "pretrained-hourly",
        "pretrained-daily",
    } <= set(names)
    flat = {"series": [{"start": "2022-01-01", "values": [100.0] * 48}], "level": [80]}
    with running_client(make_settings(shipped, models=names)) as c:
        r = c.post("/v1/forecast", json=flat)
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["model"] == "pretrained-monthly" and got["version"] >= 1
        one = got["forecasts"][0]
        assert one["timestamps"][0].startswith("2026-01-01") and "lo-80" in one and "hi-80" in one
        np.testing.assert_allclose(np.asarray(one["forecast"])[:, 0], 100.0, rtol=0.02)  # flat stays flat
        # fewer than two years: refused, never answered from a window unlike any it was trained on
        short = c.post("/v1/forecast", json={"series": [{"start": "2023-01-01", "values": [100.0] * 12}]})
        assert short.status_code == 422 and short.json()["error"]["field"] == "series[0].values", short.text
        assert "24" in short.json()["error"]["message"]
        for freq, model in (("QS", "quarterly"), ("YS", "yearly"), ("h", "hourly")):
            answer = c.post("/v1/forecast", json={**flat, "freq": freq})
            assert answer.status_code == 200, answer.text
            assert answer.json()["model"] == f"pretrained-{model}"
        # a daily series by its timestamps, a weekday and weekend cycle forecast in its own units (the
        # intervals' spread at lag 1 over the read-out's week: before, one absolute width for any scale;
        # the weekend's jumps make it wide for so regular a series, docs/pretrained.md says why kept)
        days = pd.date_range("2024-01-01", periods=70, freq="D")
        weekly = [100.0 + 20.0 * (d.day_of_week >= 5) + (i % 3) for i, d in enumerate(days)]
        widths = []
        for unit in (1.0, 1000.0):
            series = {"timestamps": [d.isoformat() for d in days], "values": [unit * v for v in weekly]}
            answer = c.post("/v1/forecast", json={"series": [series], "horizon": 14, "level": [80]})
            assert answer.status_code == 200, answer.text
            got = answer.json()
            assert (got["model"], got["frequency"]["name"]) == ("pretrained-daily", "daily")
            one = got["forecasts"][0]
            point = np.asarray(one["forecast"])[:, 0] / unit
            weekend = np.array([d.day_of_week >= 5 for d in pd.date_range(days[-1], periods=15)[1:]])
            assert point[weekend].min() > point[~weekend].max() + 10  # the weekend kept
            widths.append((np.asarray(one["hi-80"]) - np.asarray(one["lo-80"]))[:, 0] / unit)
        np.testing.assert_allclose(widths[1], widths[0], rtol=1e-4)
        assert 0.5 < widths[0].mean() < 40  # in the series' units: 27 (the weekend's jump is 20)


def stamped(freq: str, n: int = 30, start: str = "2001-01-01", tz: str | None = None) -> dict[str, Any]:
    """One series with its timestamps (pandas' `freq` from `start`) and no `start`, `freq` or model."""
    stamps = pd.date_range(start, periods=n, freq=freq, tz=tz)
    values = [float(v) for v in store(99, n)]
    return {"series": [{"id": "shop", "timestamps": [t.isoformat() for t in stamps], "values": values}]}


@pytest.mark.parametrize(
    ("freq", "model", "alias"),
    [
        ("QS", "quarterly", "QS"),
        ("QS-OCT", "quarterly", "QS"),
        ("YS", "yearly", "YS"),
        ("MS", "monthly", "MS"),
    ],
)
def test_the_timestamps_gaps_decide_the_frequency_without_freq(
    client: TestClient, freq: str, model: str, alias: str
) -> None:
    """Quarterly and yearly series start on the 1st of a month like monthly ones: their timestamps tell
    them apart, and the answer is the named model's for the same values from the same start."""
    body = stamped(freq, start="2001-01-01" if freq != "QS-OCT" else "2001-10-01")
    r = client.post("/v1/forecast", json=body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["model"] == f"pretrained-{model}"
    assert got["frequency"] == {"name": model, "freq": alias, "source": "timestamps", "note": None}
    one = body["series"][0]
    named = {"series": [{"id": "shop", "start": one["timestamps"][0], "values": one["values"]}]}
    want = client.post(f"/v1/models/pretrained-{model}/forecast", json=named)
    assert got["forecasts"] == want.json()["forecasts"]


def test_zoned_month_starts_across_daylight_saving_read_monthly(client: TestClient) -> None:
    """Berlin's month starts are +01:00 in winter and +02:00 in summer (a 30- or 31-day gap, an hour
    off, as instants): read on the wall clock, they step one month."""
    r = client.post("/v1/forecast", json=stamped("MS", tz="Europe/Berlin"))
    assert r.status_code == 200, r.text
    assert r.json()["frequency"]["name"] == "monthly" and r.json()["model"] == "pretrained-monthly"


def test_a_start_alone_is_assumed_and_the_answer_says_so(client: TestClient) -> None:
    got = client.post("/v1/forecast", json=monthly_body()).json()
    said = got["frequency"]
    assert (said["name"], said["freq"], said["source"]) == ("monthly", "MS", "start")
    assert "assumed monthly" in said["note"] and "quarterly" in said["note"] and "yearly" in said["note"]
    assert "`freq`" in said["note"] and "`timestamps`" in said["note"]
    told = client.post("/v1/forecast", json=monthly_body(freq="QS")).json()["frequency"]
    assert told == {"name": "quarterly", "freq": "QS", "source": "freq", "note": None}


def _with(body: dict[str, Any], i: int = 0, **fields: Any) -> dict[str, Any]:
    series = [dict(s) for s in body["series"]]
    series[i].update(fields)
    return {**body, "series": series}


QUARTERS = stamped("QS")
STAMPS = QUARTERS["series"][0]["timestamps"]
VALUES = QUARTERS["series"][0]["values"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        # a quarter missing: one row per step (null for a missing value)
        (
            _with(QUARTERS, timestamps=STAMPS[:5] + STAMPS[6:], values=VALUES[:-1]),
            "series[0].timestamps",
            "[5]",
        ),
        (_with(QUARTERS, values=VALUES[:-1]), "series[0].timestamps", "one per value"),
        (_with(QUARTERS, timestamps=["2001-01-01", "x", *STAMPS[2:]]), "timestamps", ""),
        (_with(QUARTERS, start="2001-04-01"), "series[0].start", "first timestamp"),
        ({**QUARTERS, "freq": "MS"}, "series[0].timestamps", "freq"),
        (
            {"series": [*QUARTERS["series"], {**stamped("YS")["series"][0], "id": "yearly shop"}]},
            "series[1].timestamps",
            "one frequency",
        ),
        (
            {"series": [*QUARTERS["series"], {"start": "2001-01-01T13:00:00", "values": VALUES}]},
            "series[1].start",
            "quarterly",
        ),
        (stamped("15min", n=200), "freq", "no pretrained model forecasts 15min"),
        (
            stamped("h", n=200),
            "freq",
            "no pretrained model forecasts hourly series (read from the series' timestamps)",
        ),
    ],
)
def test_timestamps_that_do_not_fit_are_422_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str, words: str
) -> None:
    r = client.post("/v1/forecast", json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert field in (error["field"] or ""), error
    assert words in error["message"], error
    if words.startswith("no pretrained model forecasts"):
        assert isinstance(error["limit"], list) and "hourly" not in error["limit"], error


@pytest.mark.parametrize(
    ("freq", "model", "month_start"),
    [
        ("ME", "monthly", "MS"),
        ("QE", "quarterly", "QS"),
        ("YE", "yearly", "YS"),
        ("QE-NOV", "quarterly", "QS"),
    ],
)
def test_month_end_timestamps_are_answered_on_month_ends(
    client: TestClient, freq: str, model: str, month_start: str
) -> None:
    """Month-end series (pandas' ME, QE, YE, the default `M` of older pandas) get the pretrained model of
    their frequency, the forecast of the same values on month starts, and timestamps on month ends."""
    body = {**stamped(freq, start="2001-01-01"), "level": [80]}
    r = client.post("/v1/forecast", json=body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["model"] == f"pretrained-{model}"
    assert got["frequency"] == {
        "name": model,
        "freq": freq.split("-")[0],
        "source": "timestamps",
        "note": None,
    }
    last = pd.Timestamp(body["series"][0]["timestamps"][-1])
    horizon = len(got["forecasts"][0]["forecast"])
    want_stamps = pd.date_range(last, periods=horizon + 1, freq=freq)[1:]
    assert [pd.Timestamp(t) for t in got["forecasts"][0]["timestamps"]] == [
        t.tz_localize("UTC") for t in want_stamps
    ]
    starts = stamped(
        month_start,
        start=str((pd.Timestamp(body["series"][0]["timestamps"][0]) + pd.Timedelta(days=1)).date()),
    )
    same = client.post("/v1/forecast", json={**starts, "level": [80]}).json()["forecasts"][0]
    assert got["forecasts"][0]["forecast"] == same["forecast"]
    assert got["forecasts"][0]["lo-80"] == same["lo-80"]


def test_a_month_end_start_with_freq_is_answered_and_month_starts_still_name_the_anchor(
    client: TestClient,
) -> None:
    ends = monthly_body(freq="ME")
    ends["series"][0]["start"] = "2021-01-31"
    r = client.post("/v1/forecast", json=ends)
    assert r.status_code == 200, r.text
    assert r.json()["forecasts"][0]["timestamps"][0].startswith("2023-07-31")  # 30 months from 2021-01
    for freq in ("M", None):  # pandas' old month-end alias, or none: the start decides
        body = {**ends, "freq": freq} if freq else {k: v for k, v in ends.items() if k != "freq"}
        r = client.post("/v1/forecast", json=body)
        assert r.status_code == (200 if freq else 422), r.text
    wrong = monthly_body(freq="ME")
    wrong["series"][0]["start"] = "2021-01-15"
    r = client.post("/v1/forecast", json=wrong)
    assert r.status_code == 422 and r.json()["error"]["field"] == "series[0].start", r.text
    assert "last (or first) day of a month" in r.json()["error"]["message"]
    ends["freq"] = "MS"  # month starts named, a month-end start sent: the model names its anchor
    r = client.post("/v1/forecast", json=ends)
    assert r.status_code == 422 and r.json()["error"]["field"] == "series[0].start", r.text
    assert "first day of a month" in r.json()["error"]["message"]
    late = monthly_body(freq="ME")
    late["series"][0]["start"] = "9999-12-31"
    r = client.post("/v1/forecast", json=late)
    assert r.status_code == 422 and r.json()["error"]["field"] == "series[0].start", r.text


def test_the_openapi_document_shows_timestamps_and_the_frequency_answered(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    answer = doc["paths"]["/v1/forecast"]["post"]["responses"]["200"]["content"]["application/json"]
    assert answer["schema"]["$ref"].endswith("/ZeroShotResponse")
    schemas = doc["components"]["schemas"]
    assert set(schemas["FrequencyUsed"]["properties"]) == {"name", "freq", "source", "note"}
    assert "frequency" in schemas["ZeroShotResponse"]["properties"]
    assert "timestamps" in schemas["ZeroShotSeries"]["properties"]
