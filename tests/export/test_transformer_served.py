"""The global RSA-Transformer from a written long CSV to a served forecast (issue 36): daily shops whose
sales a promotion raises (future-known) with a size class (static, categorical), trained through
`python -m export.panel train --network transformer` on a tiny budget, exported with its intervals, served
in-process. /v1 answers the Python model's forecast (`PanelTransformer.forecast` fed the trainer's own
covariate rows) for a full and a short history, on the calendar's timestamps; OIP v2's named inputs give
the same values; /v1/models lists the covariates; the fit on request answers 422 not_refittable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from export.global_models.cli import cli
from export.global_models.transformer import PanelTransformer
from export.global_models.transformer_onnx import TOLERANCE, load_transformer
from tests.app.conftest import make_settings, running_client
from tests.export.test_covariates_served import DAYS, H, expected, write_shops
from tests.export.test_covariates_served import request_series as shop_series

NAME = "shops_tf"
request_series = partial(shop_series, past=False)  # the transformer is trained without the footfall
L = 14  # --input-periods 2 of the weekly cycle


@dataclass(frozen=True)
class Served:
    client: TestClient
    model: PanelTransformer
    shops: dict[str, dict[str, Any]]
    folder: Path
    train_output: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("transformer")
    data = str(folder / "shops.csv")
    shops = write_shops(folder / "shops.csv", n=8)
    runner = CliRunner()
    train = runner.invoke(
        cli,
        [
            "train",
            "--data",
            data,
            "--horizon",
            str(H),
            "--input-periods",
            "2",
            "--future",
            "promo",
            "--static",
            "size",
            "--drop",
            "footfall",
            "--network",
            "transformer",
            "--epochs",
            "2",
            # PyTorch's start: every part of the network is trained and served (the least-squares start
            # keeps the attention head at 0 until an epoch beats it, which two epochs here never do)
            "--start",
            "random",
            "--windows-per-epoch",
            "256",
            "--out",
            str(folder / "run"),
        ],
    )
    assert train.exit_code == 0, train.output
    model_file = folder / "run" / "model.json"
    repo = folder / "repo"
    args = ["export", "--model", str(model_file), "--name", NAME, "--repository", str(repo), "--data", data]
    args += ["--drop", "footfall"]
    export = runner.invoke(cli, args)
    assert export.exit_code == 0, export.output
    with running_client(make_settings(repo)) as client:
        yield Served(client, load_transformer(model_file).model, shops, repo / NAME / "1", train.output)


def close(got: np.ndarray, want: np.ndarray, history: np.ndarray) -> None:
    """Within the exporter's tolerance, in units of the window's scale (its last week's mean |value|)."""
    scale = float(np.abs(history[-7:]).mean())
    assert float(np.abs(got - want).max()) <= TOLERANCE * scale, (got, want)


def test_training_says_what_it_did(served: Served) -> None:
    assert f"L = {L} (given)" in served.train_output
    assert served.model.best_epoch > 0 and float(served.model.network.head.weight.detach().abs().max()) > 0
    report = {r["covariate"] for r in served.model.covariate_report}
    assert report == {"promo", "size"}
    assert "covariate promo: validation MASE" in served.train_output
    assert served.model.covariates is not None and served.model.covariates.future == ("promo",)


def test_v1_serves_the_transformer_for_a_series_seen_and_a_short_one(served: Served) -> None:
    s0, s1 = served.shops["shop_0"], served.shops["shop_1"]
    n, short_start = DAYS - H, DAYS - H - 10  # shop_1 as a new shop with 10 days (L = 14, min history 7)
    body = {"series": [request_series(s0, "shop_0", n), request_series(s1, "new", n, short_start)]}
    r = served.client.post(f"/v1/models/{NAME}/forecast", json=body)
    assert r.status_code == 200, r.text
    got = [np.array(f["forecast"])[:, 0] for f in r.json()["forecasts"]]
    close(got[0], expected(served.model, s0, n), s0["y"][:n])
    close(got[1], expected(served.model, s1, n, short_start), s1["y"][short_start:n])
    stamps = r.json()["forecasts"][0]["timestamps"]
    assert [pd.Timestamp(t).date() for t in stamps] == [t.date() for t in s0["stamps"][n : n + H]]
    # the promotions reach the network: flipping them changes the forecast
    flipped = request_series(s0, "shop_0", n)
    flipped["future"]["promo"] = [1.0 - p for p in flipped["future"]["promo"]]
    r2 = served.client.post(f"/v1/models/{NAME}/forecast", json={"series": [flipped]})
    again = np.array(r2.json()["forecasts"][0]["forecast"])[:, 0]
    assert float(np.abs(again - got[0]).max()) > 1e-3 * float(np.abs(got[0]).mean())


def test_v1_models_lists_the_covariates_and_the_kind(served: Served) -> None:
    version = served.client.get(f"/v1/models/{NAME}").json()["versions"][0]
    assert version["kind"] == "global_transformer"
    covariates = {c["name"]: c for c in version["panel"]["covariates"]}
    assert covariates["promo"]["kind"] == "future" and covariates["promo"]["horizon"]
    assert covariates["size"]["categories"] == sorted({s["size"] for s in served.shops.values()})
    manifest = json.loads((served.folder / "manifest.json").read_text())
    assert "readout" not in manifest and manifest["verification"]["max_error"] <= TOLERANCE


def test_v1_intervals_from_the_held_out_forecasts(served: Served) -> None:
    body = request_series(served.shops["shop_0"], "shop_0", DAYS - H)
    r = served.client.post(f"/v1/models/{NAME}/forecast", json={"series": [body], "level": [80]})
    assert r.status_code == 200, r.text
    f = r.json()["forecasts"][0]
    point, lo, hi = (np.array(f[k])[:, 0] for k in ("forecast", "lo-80", "hi-80"))
    assert (lo < point).all() and (point < hi).all()


def test_oip_v2_named_inputs_give_the_same_values(served: Served) -> None:
    s0, s1 = served.shops["shop_0"], served.shops["shop_1"]
    n = DAYS - H
    window = np.stack([s0["y"][n - L : n], s1["y"][n - L : n]]).astype(np.float32)
    window[1, : L - 10] = 0.0  # before shop_1's start: ignored, as `lengths` says
    future = np.stack([s0["promo"][n : n + H], s1["promo"][n : n + H]]).astype(np.float32)
    cats = served.model.covariates.static[0].categories  # type: ignore[union-attr]
    assert cats is not None
    sizes = [cats.index(s0["size"]), cats.index(s1["size"])]

    def tensor(name: str, datatype: str, array: np.ndarray) -> dict[str, Any]:
        return {
            "name": name,
            "datatype": datatype,
            "shape": list(array.shape),
            "data": array.ravel().tolist(),
        }

    inputs = [
        tensor("window", "FP32", window),
        tensor("lengths", "INT64", np.array([L, 10])),
        tensor("future_promo", "FP32", future),
        tensor("static_size", "INT64", np.array(sizes)),
    ]
    r = served.client.post(
        f"/v2/models/{NAME}/infer", json={"inputs": inputs, "outputs": [{"name": "forecast"}]}
    )
    assert r.status_code == 200, r.text
    got = np.array(r.json()["outputs"][0]["data"]).reshape(2, H)
    body = {"series": [request_series(s0, "a", n), request_series(s1, "b", n, n - 10)]}
    v1 = served.client.post(f"/v1/models/{NAME}/forecast", json=body).json()
    want = np.array([f["forecast"] for f in v1["forecasts"]])[:, :, 0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # one graph, the same window
    close(got[1], expected(served.model, s1, n, n - 10), s1["y"][n - 10 : n])


def test_the_transformer_is_not_refit_on_request(served: Served) -> None:
    body = request_series(served.shops["shop_0"], "shop_0", DAYS - H)
    body.pop("future"), body.pop("static")
    r = served.client.post(f"/v1/models/{NAME}/fit_forecast", json={"series": [body]})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "not_refittable" and error["field"] == "version"
    assert "global transformer" in error["message"] and "--network transformer" in error["message"]
