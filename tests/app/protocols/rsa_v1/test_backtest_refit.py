"""`cross_validation` with `refit` (issue 45, item 3): each window forecast by the global read-out
refitted on every series' values before its cutoff of the same rank, equal to refitting offline with the
exporter's own code at each cutoff (the hybrid: its local half fitted on each window, as served); the
default (true for a global read-out that can be refitted, else false); and `in_sample`, read from the
training range the exporter records in the manifest (`panel.training`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import make_settings, running_client
from tests.app.fakes import ToySpec, write_version
from tests.utils.panel import HORIZON, NAME, publish

URL = f"/v1/models/{NAME}/cross_validation"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Any, pd.DataFrame]]:
    folder = tmp_path_factory.mktemp("backtest_refit")
    repo, model = publish(folder)  # the stores: the CLI's default is the read-out alone there too
    model.folder = repo / NAME / "1"  # where the test reads its manifest
    write_version(repo, ToySpec(version=1))  # a multichannel model: nothing to refit
    frame = pd.read_csv(folder / "stores_long.csv")
    with running_client(make_settings(repo)) as client:
        yield client, model, frame


def stores(frame: pd.DataFrame, ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for sid in ids:
        rows = frame[frame["unique_id"] == sid]
        out.append({"id": sid, "start": rows["ds"].iloc[0], "values": rows["y"].tolist()})
    return out


def test_refit_equals_refitting_the_read_out_offline_before_each_cutoff(
    served: tuple[TestClient, Any, pd.DataFrame],
) -> None:
    client, model, frame = served
    ids = sorted(frame["unique_id"].unique())
    body = {"series": stores(frame, ids), "horizon": HORIZON, "n_windows": 3, "refit": True}
    r = client.post(URL, json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["refit"] is True
    values = [np.array(s["values"]) for s in body["series"]]
    for j in range(3):
        cuts = [len(v) - HORIZON * (3 - j) for v in values]
        before = [v[:t] for v, t in zip(values, cuts, strict=True)]
        # the exporter's fit (export/global_models/model.py), the hybrid's local half kept
        offline = model.refit(before)
        want = offline.forecast(before)
        got = np.array([np.array(s["windows"][j]["forecast"])[:, 0] for s in answer["series"]])
        assert [s["windows"][j]["cutoff"] for s in answer["series"]] == cuts
        assert all(s["windows"][j]["in_sample"] is False for s in answer["series"])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    # The served weights give other forecasts: they were fitted on every value, these windows' included.
    served_answer = client.post(URL, json={**body, "refit": False}).json()
    assert served_answer["refit"] is False
    assert (
        served_answer["series"][0]["windows"][0]["forecast"] != answer["series"][0]["windows"][0]["forecast"]
    )


def test_refit_is_the_default_for_a_global_read_out_and_refused_where_nothing_can_be_refitted(
    served: tuple[TestClient, Any, pd.DataFrame],
) -> None:
    client, _, frame = served
    body = {"series": stores(frame, ["store_00", "store_01"]), "horizon": HORIZON, "n_windows": 2}
    assert client.post(URL, json=body).json()["refit"] is True
    toy = {"series": [{"values": np.ones((20, 3)).tolist()}], "horizon": 3}
    assert client.post("/v1/models/toy/cross_validation", json=toy).json()["refit"] is False
    r = client.post("/v1/models/toy/cross_validation", json={**toy, "refit": True})
    assert r.status_code == 422 and r.json()["error"]["code"] == "not_refittable"
    assert r.json()["error"]["field"] == "refit" and "refit: false" in r.json()["error"]["message"]
    # One series whose first cutoff leaves no training window (train_history 24 + H 6 values): by default
    # the served weights, said; asked for, a 422 naming refit.
    short = {"series": [{"values": body["series"][0]["values"][:40]}], "horizon": 3, "n_windows": 4}
    assert client.post(URL, json=short).json()["refit"] is False
    r = client.post(URL, json={**short, "refit": True})
    assert r.status_code == 422 and r.json()["error"]["field"] == "refit"


def test_in_sample_says_which_windows_the_served_weights_were_fitted_on(
    served: tuple[TestClient, Any, pd.DataFrame],
) -> None:
    client, _, frame = served
    series = stores(frame, ["store_01"])  # 45 months from 2020-01: the training ended 2023-09 for it
    body = {"series": series, "horizon": HORIZON, "n_windows": 2, "refit": False}
    answer = client.post(URL, json=body).json()
    assert answer["training_end"] == "2023-12-01T00:00:00Z"  # the last of every store's
    assert [w["in_sample"] for w in answer["series"][0]["windows"]] == [True, True]
    # The same values as another series, after the training data: out of sample; without a start, unknown.
    later = [{**series[0], "id": "new", "start": "2024-01-01"}, {"values": series[0]["values"]}]
    answer = client.post(URL, json={**body, "series": later}).json()
    assert [w["in_sample"] for w in answer["series"][0]["windows"]] == [False, False]
    assert [w["in_sample"] for w in answer["series"][1]["windows"]] == [None, None]
    # store_01 itself, its window starting after its own training end (2023-09) but before the last
    # store's: out of sample, its own end counts.
    moved = [{**series[0], "start": "2020-07-01"}]  # the same 45 values six months later
    answer = client.post(URL, json={**body, "series": moved, "n_windows": 1}).json()
    assert answer["series"][0]["windows"][0]["timestamps"][0] == "2023-10-01T00:00:00Z"
    assert answer["series"][0]["windows"][0]["in_sample"] is False


def test_the_manifest_records_the_training_range_and_an_older_one_reads_as_unknown(
    served: tuple[TestClient, Any, pd.DataFrame],
) -> None:
    from app.artifacts.manifest import load_manifest

    _, model, _ = served
    assert (
        model.training["series"] == 12 and model.training["ends"]["store_01"] == "2023-09-01T00:00:00+00:00"
    )
    path = model.folder / "manifest.json"
    written = json.loads(path.read_text())
    assert written["panel"]["training"] == model.training
    del written["panel"]["training"]  # a version exported before issue 45
    older = path.parent.parent / "older.json"
    older.write_text(json.dumps(written))
    manifest = load_manifest(older)
    assert manifest.panel is not None and manifest.panel.training is None


def test_the_metrics_carry_the_seasonal_naives_on_the_same_points(
    served: tuple[TestClient, Any, pd.DataFrame],
) -> None:
    """Issue 45, item 5: beside every summary (pooled, per series, per channel) the seasonal naive
    forecast's, scored on the same points with the same MASE scale: each step the value a season before
    it (the stores' period 12; the toy, without a cycle: the last value)."""
    client, _, frame = served
    body = {"series": stores(frame, ["store_00", "store_02"]), "horizon": HORIZON, "n_windows": 2}
    answer = client.post(URL, json=body).json()
    errors, scaled = [], []
    for sent, result in zip(body["series"], answer["series"], strict=True):
        v = np.array(sent["values"])
        cuts = [w["cutoff"] for w in result["windows"]]
        scale = np.abs(v[12 : cuts[0]] - v[: cuts[0] - 12]).mean()
        e = np.concatenate([v[t : t + HORIZON] - v[t - 12 : t - 12 + HORIZON] for t in cuts])
        naive = result["metrics"]["seasonal_naive"]
        assert naive["mae"] == pytest.approx(np.abs(e).mean(), rel=1e-12)
        assert naive["mase"] == pytest.approx(np.abs(e).mean() / scale, rel=1e-12)
        assert naive["points"] == result["metrics"]["points"] == 2 * HORIZON
        errors.append(e)
        scaled.append(np.abs(e) / scale)
    pooled = answer["metrics"]["seasonal_naive"]
    assert pooled["mse"] == pytest.approx((np.concatenate(errors) ** 2).mean(), rel=1e-12)
    assert pooled["mase"] == pytest.approx(np.concatenate(scaled).mean(), rel=1e-12)
    toy = np.random.default_rng(0).normal(10, 3, (20, 3))
    r = client.post(
        "/v1/models/toy/cross_validation", json={"series": [{"values": toy.tolist()}], "horizon": 3}
    )
    series = r.json()["series"][0]
    last = toy[16]  # the value before the cutoff, repeated
    want = np.abs(toy[17:20, 1] - last[1]).mean()
    assert series["channel_metrics"]["MUFL"]["seasonal_naive"]["mae"] == pytest.approx(want, rel=1e-12)
