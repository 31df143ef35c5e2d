"""Covariates from a written long CSV to a served forecast (issue 36): a daily panel of shops whose sales a
promotion raises (future-known), with a weekly cycle (calendar: day of week), a size class (static,
categorical) and a footfall count observed with the sales (past-only). Trained and exported through the
CLI, served in-process; the served values are checked against the Python model fed the same covariates
through the trainer's own window code (export/covariates.py), the timestamps against the calendar, and
bad covariates against 422s naming the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from export.covariates import CovariateSeries, series_covariate_rows
from export.global_models.model import GlobalModel
from tests.app.conftest import make_settings, running_client

if TYPE_CHECKING:  # the transformer's test shares expected(); this module needs no torch
    from export.global_models.transformer import PanelTransformer

H, DAYS, NAME = 7, 140, "shops"
EFFECT = 0.3  # a promotion day sells 30% more


def shop(seed: int, days: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(days)
    level = rng.uniform(50, 500)
    promo = (rng.random(days) < 0.25).astype(float)
    weekly = 1 + 0.25 * np.sin(2 * np.pi * t / 7)
    y = level * weekly * (1 + EFFECT * promo) * (1 + 0.02 * rng.standard_normal(days))
    footfall = np.round(y / 3 + rng.standard_normal(days), 2)
    return {"y": np.round(y, 3), "promo": promo, "footfall": footfall, "level": np.full(days, level)}


def write_shops(path: Path, n: int = 10) -> dict[str, dict[str, Any]]:
    rows, shops = [], {}
    for i in range(n):
        s = shop(i, DAYS)
        size = "big" if s["level"][0] > 250 else "small"
        stamps = pd.date_range("2023-01-02", periods=DAYS, freq="D")
        shops[f"shop_{i}"] = {**s, "size": size, "stamps": stamps}
        rows += [
            (f"shop_{i}", t.date().isoformat(), s["y"][k], int(s["promo"][k]), s["footfall"][k], size)
            for k, t in enumerate(stamps)
        ]
    frame = pd.DataFrame(rows, columns=["unique_id", "ds", "y", "promo", "footfall", "size"])
    frame.to_csv(path, index=False)
    return shops


@dataclass(frozen=True)
class Served:
    client: TestClient
    model: GlobalModel
    shops: dict[str, dict[str, Any]]
    train_output: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from tests.utils.shops import TRAIN_LOG, publish_shops

    folder = tmp_path_factory.mktemp("covariates")
    # The shops (tests/utils/shops.py): trained once per process, for every module that serves them.
    repo = publish_shops(folder, n=10, short=False).repository
    shops = write_shops(folder / "shops.csv")  # the same file again, for its series
    model_file = folder / "run" / "model.json"
    train_output = (folder / TRAIN_LOG).read_text()
    with running_client(make_settings(repo)) as client:
        yield Served(client, GlobalModel.load(model_file), shops, train_output)


def request_series(s: dict[str, Any], sid: str, n: int, start: int = 0, past: bool = True) -> dict[str, Any]:
    """Shop `sid`'s values [start, n) with their covariates (footfall unless `past` is False), and the
    promotions of the H days after."""
    item = {
        "id": sid,
        "start": s["stamps"][start].date().isoformat(),
        "values": s["y"][start:n].tolist(),
        "future": {"promo": s["promo"][n : n + H].tolist()},
        "past": {"footfall": s["footfall"][start:n].tolist()},
        "static": {"size": s["size"]},
    }
    if not past:
        del item["past"]
    return item


def expected(model: GlobalModel | PanelTransformer, s: dict[str, Any], n: int, start: int = 0) -> np.ndarray:
    """The Python model's forecast after s[start:n], its covariate row built by the trainer's code (the
    footfall only for a model that reads it)."""
    assert model.covariates is not None
    full = CovariateSeries(
        "x",
        s["y"][start : n + H],
        s["stamps"][start : n + H].to_numpy().astype("datetime64[ns]"),
        past={"footfall": s["footfall"][start : n + H]} if "footfall" in model.covariates.past else {},
        future={"promo": s["promo"][start : n + H]},
        static={"size": s["size"]},
    )
    rows = series_covariate_rows(full, model.covariates, np.array([n - start]))
    return model.forecast([s["y"][start:n]], covariates=rows)[0]


def test_training_reports_each_covariate_on_validation(served: Served) -> None:
    report = {r["covariate"]: r for r in served.model.covariate_report}
    assert set(report) == {"promo", "footfall", "calendar", "size"}
    promo = report["promo"]
    assert promo["helps"] and promo["mase_with"] < promo["mase_without"]  # the effect is 30%
    # judged at several origins (issue 45, item 6): the promotion lowers the MASE at every one
    assert promo["origins"] == 4 and promo["wins"] == 4 and promo["verdict"] == "helps"
    assert "covariate promo: validation MASE" in served.train_output
    assert "lower at 4 of 4 origins" in served.train_output
    for row in report.values():  # every verdict is printed, helping or not
        assert f"covariate {row['covariate']}:" in served.train_output


def test_v1_serves_covariates_for_a_series_seen_and_a_short_one(served: Served) -> None:
    s0, s1 = served.shops["shop_0"], served.shops["shop_1"]
    n, short_start = DAYS - H, DAYS - H - 10  # shop_1 as a new shop with 10 days (L = 28)
    body = {"series": [request_series(s0, "shop_0", n), request_series(s1, "new", n, short_start)]}
    r = served.client.post(f"/v1/models/{NAME}/forecast", json=body)
    assert r.status_code == 200, r.text
    got = [np.array(f["forecast"])[:, 0] for f in r.json()["forecasts"]]
    np.testing.assert_allclose(got[0], expected(served.model, s0, n), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got[1], expected(served.model, s1, n, short_start), rtol=1e-4, atol=1e-3)
    stamps = r.json()["forecasts"][0]["timestamps"]
    assert [pd.Timestamp(t).date() for t in stamps] == [t.date() for t in s0["stamps"][n : n + H]]
    # the promotions move the forecast by about the effect they were generated with
    flipped = request_series(s0, "shop_0", n)
    flipped["future"]["promo"] = [1.0 - p for p in flipped["future"]["promo"]]
    r2 = served.client.post(f"/v1/models/{NAME}/forecast", json={"series": [flipped]})
    again = np.array(r2.json()["forecasts"][0]["forecast"])[:, 0]
    promo = np.array(s0["promo"][n : n + H])
    on = np.where(promo == 1, got[0], again)
    off = np.where(promo == 1, again, got[0])
    assert abs(float(np.mean(on / off)) - (1 + EFFECT)) < 0.1 * EFFECT * 2


def test_v1_model_metadata_lists_the_covariates(served: Served) -> None:
    version = served.client.get(f"/v1/models/{NAME}").json()["versions"][0]
    covariates = {c["name"]: c for c in version["panel"]["covariates"]}
    assert covariates["promo"] == {
        "name": "promo",
        "kind": "future",
        "dtype": "float",
        "categories": None,
        "horizon": True,
    }
    assert covariates["footfall"]["kind"] == "past" and not covariates["footfall"]["horizon"]
    assert covariates["size"]["categories"] == ["big", "small"]
    assert covariates["dayofweek"]["kind"] == "calendar"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda b: b["future"].update(promo=[1.0] * (H - 1)), "series[0].future.promo", "needs 7"),
        (lambda b: b["future"].update(price=[1.0] * H), "series[0].future.price", "no future covariate"),
        (lambda b: b.pop("future"), "series[0].future.promo", "missing"),
        (lambda b: b["past"].update(footfall=[1.0] * 5), "series[0].past.footfall", "one per value"),
        (lambda b: b["static"].update(size="huge"), "series[0].static.size", "training categories"),
        (lambda b: b["static"].update(size=3.0), "series[0].static.size", "training categories"),
        (lambda b: b.pop("start"), "series[0].start", "calendar"),
    ],
)
def test_v1_refuses_bad_covariates_naming_the_field(
    served: Served, change: Any, field: str, words: str
) -> None:
    body = request_series(served.shops["shop_0"], "shop_0", DAYS - H)
    change(body)
    r = served.client.post(f"/v1/models/{NAME}/forecast", json={"series": [body]})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == field and words in error["message"], error


def test_v1_refuses_a_wrong_type_through_the_schema(served: Served) -> None:
    body = request_series(served.shops["shop_0"], "shop_0", DAYS - H)
    body["future"]["promo"][2] = "yes"
    r = served.client.post(f"/v1/models/{NAME}/forecast", json={"series": [body]})
    assert r.status_code == 422, r.text
    assert "series[0].future.promo[2]" in r.text or "future.promo.2" in r.text


def oip_inputs(served: Served, n: int) -> tuple[list[dict[str, Any]], np.ndarray]:
    """shop_0 and shop_1 after n days as OIP v2 JSON inputs (shop_1 a 10-day history via `lengths`),
    and the /v1 answer for the same series."""
    L = served.model.input_length
    s0, s1 = served.shops["shop_0"], served.shops["shop_1"]
    window = np.stack([s0["y"][n - L : n], s1["y"][n - L : n]]).astype(np.float32)
    past = np.stack([s0["footfall"][n - L : n], s1["footfall"][n - L : n]]).astype(np.float32)
    window[1, : L - 10] = 0.0  # before shop_1's start: ignored
    past[1, : L - 10] = 0.0  # ignored too, as `lengths` says
    future = np.stack([s0["promo"][n : n + H], s1["promo"][n : n + H]]).astype(np.float32)
    cats = served.model.covariates.static[0].categories  # type: ignore[union-attr]
    assert cats is not None
    sizes = [cats.index(s0["size"]), cats.index(s1["size"])]
    starts = [int(s["stamps"][n - L].timestamp()) for s in (s0, s1)]

    def tensor(name: str, datatype: str, array: np.ndarray) -> dict[str, Any]:
        data = (
            [None if np.isnan(x) else float(x) for x in array.ravel()]
            if datatype == "FP32"
            else array.ravel().tolist()
        )
        return {"name": name, "datatype": datatype, "shape": list(array.shape), "data": data}

    inputs = [
        tensor("window", "FP32", window),
        tensor("lengths", "INT64", np.array([L, 10])),
        tensor("future_promo", "FP32", future),
        tensor("past_footfall", "FP32", past),
        tensor("static_size", "INT64", np.array(sizes)),
        tensor("start", "INT64", np.array(starts)),
    ]
    body = {"series": [request_series(s0, "a", n), request_series(s1, "b", n, n - 10)]}
    r = served.client.post(f"/v1/models/{NAME}/forecast", json=body)
    assert r.status_code == 200, r.text
    return inputs, np.array([f["forecast"] for f in r.json()["forecasts"]])[:, :, 0]


def test_oip_v2_takes_named_covariate_inputs(served: Served) -> None:
    inputs, want = oip_inputs(served, DAYS - H)
    r = served.client.post(
        f"/v2/models/{NAME}/infer", json={"inputs": inputs, "outputs": [{"name": "forecast"}]}
    )
    assert r.status_code == 200, r.text
    got = np.array(r.json()["outputs"][0]["data"]).reshape(2, H)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    meta = served.client.get(f"/v2/models/{NAME}").json()
    assert {t["name"] for t in meta["inputs"]} >= {"future_promo", "past_footfall", "static_size", "start"}
    missing = served.client.post(f"/v2/models/{NAME}/infer", json={"inputs": inputs[:2]})
    assert missing.status_code == 400 and "future_promo" in missing.text, missing.text
    bad = [*inputs[:4], {**inputs[4], "data": [0, 7]}, inputs[5]]
    r = served.client.post(f"/v2/models/{NAME}/infer", json={"inputs": bad})
    assert r.status_code == 400 and "static_size[1]" in r.text, r.text


def test_kserve_timeseries_says_it_has_no_covariates(served: Served) -> None:
    s0 = served.shops["shop_0"]
    item = {"type": "univariate_time_series", "name": "a", "series": s0["y"][:60].tolist(), "frequency": "D"}
    body = {"model": NAME, "inputs": [{**item, "start_timestamp": "2023-01-02"}], "options": {"horizon": 3}}
    r = served.client.post("/v1/timeseries/forecast", json=body)
    assert r.status_code == 400, r.text
    assert "no field for covariates" in r.text and "/v1/models/shops/forecast" in r.text


def test_oip_v2_binary_covariate_inputs(served: Served) -> None:
    inputs, want = oip_inputs(served, DAYS - H)
    dtypes = {"FP32": np.float32, "INT64": np.int64}
    header: dict[str, Any] = {
        "inputs": [],
        "outputs": [{"name": "forecast", "parameters": {"binary_data": True}}],
    }
    payload = b""
    for t in inputs:
        raw = np.array(t["data"], dtypes[t["datatype"]]).tobytes()
        header["inputs"].append(
            {
                "name": t["name"],
                "datatype": t["datatype"],
                "shape": t["shape"],
                "parameters": {"binary_data_size": len(raw)},
            }
        )
        payload += raw
    head = json.dumps(header).encode()
    r = served.client.post(
        f"/v2/models/{NAME}/infer",
        content=head + payload,
        headers={"Inference-Header-Content-Length": str(len(head)), "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    cut = int(r.headers["Inference-Header-Content-Length"])
    got = np.frombuffer(r.content[cut:], np.float32).reshape(2, H)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_the_fast_lane_reads_covariates_as_the_model_does(served: Served) -> None:
    from app.protocols.rsa_v1.schemas import ForecastRequest
    from app.protocols.rsa_v1.wire import fast_forecast

    body = request_series(served.shops["shop_0"], "shop_0", DAYS - H)
    raw = json.dumps({"series": [body]}).encode()
    fast = fast_forecast(raw, 16)
    assert fast is not None  # numbers only: the fast lane takes it
    slow = ForecastRequest.model_validate_json(raw).series[0]
    got = fast.series[0]
    assert (
        got.future is not None and got.past is not None and slow.future is not None and slow.past is not None
    )
    np.testing.assert_array_equal(got.future["promo"], slow.future["promo"])
    np.testing.assert_array_equal(got.past["footfall"], slow.past["footfall"])
    assert got.static == slow.static == {"size": body["static"]["size"]}
    body["past"]["footfall"][0] = None  # a null: left to the model, which reads it as not observed
    assert fast_forecast(json.dumps({"series": [body]}).encode(), 16) is None


def test_v1_intervals_of_a_covariate_model(served: Served) -> None:
    """Calibrated with each series' covariates at export: bands around the covariate forecast."""
    body = request_series(served.shops["shop_0"], "shop_0", DAYS - H)
    r = served.client.post(f"/v1/models/{NAME}/forecast", json={"series": [body], "level": [80]})
    assert r.status_code == 200, r.text
    f = r.json()["forecasts"][0]
    point, lo, hi = (np.array(f[k])[:, 0] for k in ("forecast", "lo-80", "hi-80"))
    assert (lo < point).all() and (point < hi).all()


def test_a_covariate_model_is_refit_on_request_with_its_covariates(served: Served) -> None:
    """/v1 fit_forecast refits a covariate model on the histories and their covariates (issue 45, item 2:
    tests/app/protocols/rsa_v1/test_refit_covariates.py): a series without them is refused naming the
    first covariate missing."""
    body = request_series(served.shops["shop_0"], "shop_0", DAYS - H)
    body.pop("future"), body.pop("past"), body.pop("static")
    r = served.client.post(f"/v1/models/{NAME}/fit_forecast", json={"series": [body]})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "series[0].future.promo" and "missing" in error["message"], error
