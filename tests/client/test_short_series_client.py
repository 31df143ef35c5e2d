"""`Client.forecast` of series shorter than a global model's input length against a real service
process: a history of `min_history` to L values is sent right-aligned with OIP v2's `lengths`, and the
answer is /v1's for the same history (and covariates: past ones NaN before the start, the calendar's
`start` the window's first row, in a zoned model's zone too); a history under `min_history` is refused
naming the series and the limit before any request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from rsa_client import Client

from tests.app.live import LiveService, live_service
from tests.utils import panel, shops
from tests.utils.panel import store, unseen


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    """The monthly stores' global read-out (no covariates), one request of at most 3 series."""
    folder = tmp_path_factory.mktemp("client-short")
    repo, _ = panel.publish(folder)
    env = {"RSA_MODEL_CONTROL": "explicit", "RSA_MAX_SERIES_PER_REQUEST": "3"}
    with live_service(repo, folder / "service.log", **env) as service:
        yield service


def stores_frame(service: LiveService) -> tuple[pd.DataFrame, int, int]:
    """Unseen stores of L, fewer than L (the model's `store_opened`) and exactly min_history values."""
    entry = httpx.get(f"{service.url}/v1/models/{panel.NAME}").json()["versions"][-1]
    L, least = entry["input_length"], entry["panel"]["min_history"]
    series = {sid: (start, values[-L:]) for sid, (start, values) in unseen().items()}
    series["store_least"] = ("2022-05-01", store(97, least))
    assert len(series["store_opened"][1]) < L and least < L
    parts = []
    for sid, (start, values) in series.items():
        stamps = pd.date_range(start, periods=len(values), freq="MS")
        parts.append(pd.DataFrame({"unique_id": sid, "ds": stamps, "y": values}))
    frame = pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=0)  # the client sorts
    return frame, L, least


def v1_forecasts(url: str, name: str, series: list[dict[str, Any]], level: list[float]) -> dict[str, Any]:
    body = {"series": series, **({"level": level} if level else {})}
    r = httpx.post(f"{url}/v1/models/{name}/forecast", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return {f["id"]: f for f in r.json()["forecasts"]}


def test_short_series_of_a_global_model_are_v1s(stores: LiveService) -> None:
    frame, L, least = stores_frame(stores)
    with Client(stores.url, concurrency=1) as client:
        spec = client.model(panel.NAME)
        assert spec.min_history == least
        level = spec.levels[:1]
        out = client.forecast(frame, model=panel.NAME, level=level)
    series = [
        {"id": sid, "start": rows["ds"].iloc[0].isoformat(), "values": rows["y"].tolist()}
        for sid, rows in frame.sort_values(["unique_id", "ds"]).groupby("unique_id", sort=True)
    ]
    assert sorted(len(s["values"]) for s in series) == sorted([least, 15, L])
    expected = v1_forecasts(stores.url, panel.NAME, series, level)
    assert sorted(out["unique_id"].unique()) == sorted(expected)
    keys = [("", "forecast")] + [(f"-{s}-{v:g}", f"{s}-{v:g}") for v in level for s in ("lo", "hi")]
    for sid, rows in out.groupby("unique_id"):
        want = expected[sid]
        assert (rows["ds"].to_numpy() == pd.to_datetime(want["timestamps"]).tz_convert(None).to_numpy()).all()
        for suffix, key in keys:
            np.testing.assert_array_equal(
                rows[f"{panel.NAME}{suffix}"].to_numpy(),
                np.asarray(want[key], np.float32)[:, 0],
                err_msg=f"{sid} {key}",
            )


def test_text_dates_of_a_frame_read_from_a_csv_forecast_as_its_datetimes(stores: LiveService) -> None:
    """A frame read from a CSV without parse_dates holds its dates as text ("Mar-21", as a spreadsheet
    writes months): the client reads them by the exporter's rule (pandas' own guess reads "Mar-21" as
    21 March of year 1) and answers as for the same frame with datetimes, to the value."""
    frame, _, _ = stores_frame(stores)
    text = frame.assign(ds=frame["ds"].dt.strftime("%b-%y"))
    with Client(stores.url, concurrency=1) as client:
        typed = client.forecast(frame, model=panel.NAME)
        written = client.forecast(text, model=panel.NAME)
    pd.testing.assert_frame_equal(written, typed)


def test_a_short_series_missing_values_are_filled_as_v1_fills_them(stores: LiveService) -> None:
    """A short series missing its first value (and one more): the service fills it among the series' own
    values, as /v1 does, not from the 0 before its start."""
    frame, _, _ = stores_frame(stores)
    rows = frame[frame["unique_id"] == "store_opened"].sort_values("ds").reset_index(drop=True)
    rows.loc[[0, 6], "y"] = np.nan
    with Client(stores.url) as client:
        out = client.forecast(rows, model=panel.NAME)
    values = [None if np.isnan(v) else v for v in rows["y"]]
    series = [{"id": "store_opened", "start": rows["ds"].iloc[0].isoformat(), "values": values}]
    want = v1_forecasts(stores.url, panel.NAME, series, [])["store_opened"]
    np.testing.assert_array_equal(out[panel.NAME].to_numpy(), np.asarray(want["forecast"], np.float32)[:, 0])


def test_a_series_under_min_history_is_refused_before_any_request(
    stores: LiveService, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame, _, least = stores_frame(stores)
    cut = frame[frame["unique_id"] == "store_least"].sort_values("ds").iloc[1:]
    frame = pd.concat([frame[frame["unique_id"] != "store_least"], cut])
    with Client(stores.url) as client:

        def no_request(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a forecast request was sent")

        monkeypatch.setattr(client, "_infer", no_request)
        words = rf"shorter than the model's min_history {least} .*'store_least' \({least - 1} rows\)"
        with pytest.raises(ValueError, match=words):
            client.forecast(frame, model=panel.NAME)


@pytest.mark.parametrize("timezone", [None, "America/Bogota"])
def test_a_short_shop_with_covariates_is_v1s(tmp_path: Path, timezone: str | None) -> None:
    """The shops model (future promo, past footfall, static size, day-of-week calendar; L = 28): the shop
    with 10 days of history is answered as /v1 answers it; in a zoned model the calendar's `start` is the
    window's first row read in the zone (a day off, the day-of-week calendar would differ)."""
    published = shops.publish_shops(tmp_path, n=4, short=True, timezone=timezone)
    history, future = published.history, published.future
    late = "shop_3"
    assert (history["unique_id"] == late).sum() == shops.SHORT < 28
    with live_service(published.repository, tmp_path / "service.log") as service:
        with Client(service.url, concurrency=1) as client:
            out = client.forecast(history, model=shops.NAME, X_df=future)
            # the past covariates are sent: another footfall gives another forecast for the short shop
            other = client.forecast(
                history.assign(footfall=history["footfall"] * 3), model=shops.NAME, X_df=future
            )
        series = shops.v1_series(history, future)
        expected = v1_forecasts(service.url, shops.NAME, series, [])
    assert sorted(out["unique_id"].unique()) == sorted(expected)
    for sid, rows in out.groupby("unique_id"):
        want = expected[sid]
        stamps = pd.to_datetime([t[:19] for t in want["timestamps"]])  # the model's wall clock
        assert (rows["ds"].to_numpy() == stamps.to_numpy()).all()
        got = rows[shops.NAME].to_numpy()
        np.testing.assert_array_equal(got, np.asarray(want["forecast"], np.float32)[:, 0], err_msg=sid)
    short = out["unique_id"] == late
    assert not np.array_equal(other[short][shops.NAME].to_numpy(), out[short][shops.NAME].to_numpy())
