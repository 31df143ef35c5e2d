"""The hybrid global model (export/global_models/hybrid.py: the REM read-out averaged with Theta and the
damped trend fitted per series at forecast time) served: trained and exported through the CLI's defaults, its
/v1, OIP v2 and batch answers equal the exporter's numpy forecast and each other, a series too short for the
local models gets the read-out alone, and fit on request refits it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from app.artifacts.hybrid import LocalSpec
from app.artifacts.readout import forecast as readout_forecast
from batch.score import Forecaster, Job
from export.global_models.hybrid import MEMBER_SETS
from export.global_models.model import GlobalModel, fit_global
from tests.app.conftest import make_settings, running_client
from tests.utils.panel import HORIZON, NAME, publish, store, unseen


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, GlobalModel]]:
    folder = tmp_path_factory.mktemp("hybrid")
    yield publish(folder, local=True)


def test_the_cli_default_is_the_hybrid_and_its_manifest_says_so(hybrid: tuple[Path, GlobalModel]) -> None:
    repo, model = hybrid
    assert model.local is not None and model.local.members in MEMBER_SETS
    manifest = json.loads((repo / NAME / "1" / "manifest.json").read_text())
    assert LocalSpec.from_json(manifest["panel"]["local"]) == model.local
    assert manifest["input_length"] == model.window_length >= model.input_length
    assert [t["name"] for t in manifest["inputs"]] == ["window", "local", "local_weight"]
    assert manifest["verification"]["max_error"] < 1e-4
    assert any(k.startswith("local_") for k in model.search)  # the local window's validation scores


def test_v1_and_oip_v2_answer_the_exporters_hybrid_forecast(hybrid: tuple[Path, GlobalModel]) -> None:
    repo, model = hybrid
    series = unseen()
    want = model.forecast([v for _, v in series.values()])
    body = {
        "series": [{"id": k, "start": s, "values": v.tolist()} for k, (s, v) in series.items()],
        "level": [80],
    }
    W = model.window_length
    window = np.zeros((len(series), W), np.float32)
    lengths = []
    for i, (_, v) in enumerate(series.values()):
        tail = v[-W:]
        window[i, W - len(tail) :] = tail
        lengths.append(len(tail))
    oip = {
        "inputs": [
            {
                "name": "window",
                "datatype": "FP32",
                "shape": list(window.shape),
                "data": window.ravel().tolist(),
            },
            {"name": "lengths", "datatype": "INT64", "shape": [len(lengths)], "data": lengths},
        ]
    }
    with running_client(make_settings(repo, models=[NAME])) as client:
        r = client.post(f"/v1/models/{NAME}/forecast", json=body)
        o = client.post(f"/v2/models/{NAME}/infer", json=oip)
    assert r.status_code == 200, r.text
    assert o.status_code == 200, o.text
    got = np.array([f["forecast"] for f in r.json()["forecasts"]])[:, :, 0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)  # float32 graph, float64 numpy
    outputs = {out["name"]: out for out in o.json()["outputs"]}
    np.testing.assert_array_equal(
        np.array(outputs["forecast"]["data"], np.float32).reshape(got.shape), got.astype(np.float32)
    )
    f = r.json()["forecasts"][0]
    assert np.all(np.array(f["lo-80"]) < np.array(f["forecast"])) and np.all(
        np.array(f["hi-80"]) > np.array(f["forecast"])
    )


def test_a_series_too_short_for_the_local_models_gets_the_read_out_alone_and_the_answer_says_so(
    hybrid: tuple[Path, GlobalModel],
) -> None:
    repo, model = hybrid
    assert model.local is not None
    short = store(5, model.local.min_values - 1)
    long = store(6, 60)
    alone = readout_forecast(model.weights, [short, long], model.config.fit_settings, model.kernels())
    both = model.forecast([short, long])
    np.testing.assert_allclose(both[0], alone[0])  # fewer values than min_values: the read-out alone
    assert np.abs(both[1] - alone[1]).max() > 1e-3  # enough values: the local models move it
    body = {"series": [{"id": "short", "values": short.tolist()}, {"id": "long", "values": long.tolist()}]}
    with running_client(make_settings(repo, models=[NAME])) as client:
        r = client.post(f"/v1/models/{NAME}/forecast", json=body)
    assert r.status_code == 200, r.text
    short_answer, long_answer = r.json()["forecasts"]
    note = short_answer["local_models"]
    assert note.startswith("the global read-out alone") and f"need {model.local.min_values}" in note
    assert f"{model.local.min_values - 1} observed values" in note
    assert "local_models" not in long_answer  # the local models took their share: nothing to say
    got = np.array([f["forecast"] for f in r.json()["forecasts"]])[:, :, 0]
    np.testing.assert_allclose(got, both, rtol=1e-4, atol=1e-3)


def test_the_batch_scorer_answers_as_v1(hybrid: tuple[Path, GlobalModel]) -> None:
    repo, _model = hybrid
    series = unseen()
    rows = []
    for sid, (start, v) in series.items():
        stamps = pd.date_range(start, periods=len(v), freq="MS")
        rows += [(sid, t.to_pydatetime(), float(x)) for t, x in zip(stamps, v, strict=True)]
    table = pa.Table.from_pandas(pd.DataFrame(rows, columns=["unique_id", "ds", "y"]), preserve_index=False)
    out = Forecaster(Job(str(repo), NAME, horizon=HORIZON, threads=1)).score_table(table).to_pandas()
    body = {"series": [{"id": k, "start": s, "values": v.tolist()} for k, (s, v) in series.items()]}
    with running_client(make_settings(repo, models=[NAME])) as client:
        r = client.post(f"/v1/models/{NAME}/forecast", json=body)
    assert r.status_code == 200, r.text
    for f in r.json()["forecasts"]:
        got = out[out["unique_id"] == f["id"]].drop(columns=["unique_id", "ds"]).to_numpy()[:, 0]
        np.testing.assert_array_equal(got.astype(np.float32), np.asarray(f["forecast"], np.float32)[:, 0])


def test_fit_on_request_refits_the_hybrids_read_out(hybrid: tuple[Path, GlobalModel]) -> None:
    repo, model = hybrid
    series = [store(40 + i, 60) for i in range(3)]
    body = {"series": [{"values": v.tolist()} for v in series], "level": [80]}
    with running_client(make_settings(repo, models=[NAME])) as client:
        r = client.post(f"/v1/models/{NAME}/fit_forecast", json=body)
    assert r.status_code == 200, r.text
    refit = fit_global(series, model.config, model.input_length)
    refit.local = model.local
    got = np.array([f["forecast"] for f in r.json()["forecasts"]])[:, :, 0]
    np.testing.assert_allclose(got, refit.forecast(series), rtol=1e-5, atol=1e-3)
    assert "lo-80" in r.json()["forecasts"][0]
