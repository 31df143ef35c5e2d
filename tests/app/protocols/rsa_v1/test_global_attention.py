"""/v1 attention for every model kind the repository can hold (issue 48): the multichannel toy (its
inspection graph), a global read-out, a hybrid, a covariate read-out and the global RSA-Transformer, each
trained and exported through the CLI as users do (tests/utils/panel.py, the covariate and transformer
tests' shops). A read-out's contributions add up to the forecast /v1 forecast serves; a hybrid's members
combine into it; a network's lag effects are the finite differences of its served forecast."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.artifacts.covariates import CovariateLayout
from app.inference.explain import column_owners, load_readout_graph
from export.global_models.cli import cli
from export.global_models.model import GlobalModel
from tests.app.conftest import make_settings, running_client
from tests.app.fakes import write_repository
from tests.utils.once import built
from tests.utils.panel import NAME, publish, store, unseen

KINDS = (
    "multichannel",
    "global_readout",
    "lifted_readout",
    "hybrid",
    "covariate_readout",
    "global_transformer",
)
# A global transformer exported before its inspection graph (issue 48): model.onnx alone.
OLD_TRANSFORMER = "global_transformer_without_inspect"


@dataclass(frozen=True)
class Kind:
    repo: Path
    name: str
    body: dict[str, Any]  # a valid attention request
    model: Any = None


def _shops_model(folder: Path, network: bool) -> tuple[Path, dict[str, Any]]:
    """A daily shops model with a future promotion and a static size (tests/export/test_covariates_served.py's
    data): the covariate read-out, or with `network` the global RSA-Transformer (two short epochs)."""
    from tests.export.test_covariates_served import DAYS, H, request_series, write_shops

    # Trained once per process for each kind (tests/utils/once.py): tests/app/ui/test_global_models.py too.
    built(("global-attention-shops", network), folder, lambda into: _train_shops(into, network))
    shops = write_shops(folder / "shops.csv", n=8)  # the same file again, for its series
    series = request_series(shops["shop_0"], "shop_0", DAYS - H, past=False)
    return folder / "repo", {"series": series}


def _train_shops(folder: Path, network: bool) -> None:
    from tests.export.test_covariates_served import H, write_shops

    write_shops(folder / "shops.csv", n=8)
    data = str(folder / "shops.csv")
    args = ["train", "--data", data, "--horizon", str(H), "--future", "promo", "--static", "size"]
    args += ["--calendar", "dayofweek", "--drop", "footfall", "--out", str(folder / "run")]
    if network:
        args += ["--input-periods", "2", "--network", "transformer", "--epochs", "1"]
        args += ["--start", "random", "--windows-per-epoch", "128"]
    else:
        args += ["--input-periods", "4"]
    runner = CliRunner()
    train = runner.invoke(cli, args)
    assert train.exit_code == 0, train.output
    repo = folder / "repo"
    model_file = str(folder / "run" / "model.json")
    args = ["export", "--model", model_file, "--name", "shops", "--repository", str(repo), "--data", data]
    export = runner.invoke(cli, [*args, "--drop", "footfall"])
    assert export.exit_code == 0, export.output


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Kind]:
    folder = tmp_path_factory.mktemp("global_attention")
    start, values = unseen()["store_new"]
    stores = {"series": {"id": "store_new", "start": start, "values": values.tolist()}}
    out: dict[str, Kind] = {}
    toy = write_repository(folder / "toy")
    out["multichannel"] = Kind(toy, "toy", {"series": {"values": np.ones((10, 3)).tolist()}})
    (folder / "readout").mkdir()
    repo, model = publish(folder / "readout")
    out["global_readout"] = Kind(repo, NAME, stores, model)
    (folder / "lifted").mkdir()
    repo, model = publish(folder / "lifted", lift="64")  # a random layer of 64 outputs (`--lift`)
    out["lifted_readout"] = Kind(repo, NAME, stores, model)
    (folder / "hybrid").mkdir()
    repo, model = publish(folder / "hybrid", local=True)
    # a history long enough for its local half (min_values, chosen on validation: 36 or 48 months)
    assert model.local is not None
    long = {"series": {**stores["series"], "values": store(99, model.local.min_values + 12).tolist()}}
    out["hybrid"] = Kind(repo, NAME, long, model)
    (folder / "covariates").mkdir()
    repo, body = _shops_model(folder / "covariates", network=False)
    out["covariate_readout"] = Kind(repo, "shops", body)
    (folder / "transformer").mkdir()
    repo, body = _shops_model(folder / "transformer", network=True)
    out["global_transformer"] = Kind(repo, "shops", body)
    out[OLD_TRANSFORMER] = Kind(without_inspection(repo / "shops" / "1", folder / "old"), "shops", body)
    return out


def without_inspection(version: Path, folder: Path) -> Path:
    """A copy of a global transformer's version as exported before issue 48: no inspect.onnx, no
    inspect_outputs nor layers in its manifest; the repository holding it."""
    target = folder / "repo" / "shops" / "1"
    shutil.copytree(version, target)
    (target / "inspect.onnx").unlink()
    manifest = json.loads((target / "manifest.json").read_text())
    del manifest["files"]["inspect.onnx"], manifest["inspect_outputs"], manifest["layers"]
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return folder / "repo"


@pytest.fixture(scope="module")
def clients(kinds: dict[str, Kind]) -> Iterator[dict[str, TestClient]]:
    from contextlib import ExitStack

    with ExitStack() as stack:
        yield {
            k: stack.enter_context(running_client(make_settings(v.repo, models=[v.name])))
            for k, v in kinds.items()
        }


def attention(client: TestClient, kind: Kind, **extra: Any) -> dict[str, Any]:
    r = client.post(f"/v1/models/{kind.name}/attention", json={**kind.body, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def served_forecast(client: TestClient, kind: Kind) -> np.ndarray:
    r = client.post(f"/v1/models/{kind.name}/forecast", json={"series": [kind.body["series"]]})
    assert r.status_code == 200, r.text
    return np.array(r.json()["forecasts"][0]["forecast"])[:, 0]


def terms_sum(readout: dict[str, Any]) -> np.ndarray:
    """The read-out's contributions added up: lags, missing share, bias, random layer and covariates."""
    total = np.array(readout["lag_contributions"]).sum(0)
    total += np.array(readout["missing"]["contribution"]) + np.array(readout["bias"]["contribution"])
    if readout["lift"] is not None:
        total += np.array(readout["lift"]["contribution"])
    for c in readout["covariates"]:
        total += np.array(c["contribution"])
    if readout["still"] is not None:
        total += np.array(readout["still"]["contribution"])
    return total


@pytest.mark.parametrize("kind", [*KINDS, OLD_TRANSFORMER])
def test_every_kind_answers_attention_for_a_valid_series(
    kind: str, kinds: dict[str, Kind], clients: dict[str, TestClient]
) -> None:
    body = attention(clients[kind], kinds[kind])
    if kind == "multichannel":
        assert body["layers"] and body.get("readout") is None
    elif kind == OLD_TRANSFORMER:  # no inspection graph: its lag effects through its forecast graph
        sens = body["sensitivity"]
        assert body["layers"] == [] and body.get("readout") is None
        assert np.array(sens["lag_weights"]).shape == (body["input_length"], len(sens["forecast"]))
    elif kind == "global_transformer":  # its inspection graph: softmax, REM and mixed per head
        assert body.get("readout") is None and body.get("sensitivity") is None
        heads = body["layers"][0]["heads"]
        assert {h["kind"] for h in heads} >= {"regular", "cyclic_cos"}  # tests' transformer_config
        assert all(h["gate"] is not None and (h["lambda"] or h["gamma"]) is not None for h in heads)
        tokens = len(heads[0]["matrices"]["mixed"])  # L + H: the horizon tokens of its future covariates
        assert tokens == body["input_length"] + 7 == len(heads[0]["matrices"]["mixed"][0])
        softmax = np.array(heads[0]["matrices"]["softmax"])
        np.testing.assert_allclose(softmax.sum(1), 1.0, atol=1e-5)
    else:
        assert body["layers"] == [] and body["readout"] is not None
        png = clients[kind].post(
            f"/v1/models/{kinds[kind].name}/attention", json={**kinds[kind].body, "format": "png"}
        )
        assert png.status_code == 200 and png.content.startswith(b"\x89PNG"), png.text[:200]


@pytest.mark.parametrize("kind", ["global_readout", "lifted_readout", "covariate_readout"])
def test_a_read_outs_contributions_add_up_to_its_served_forecast(
    kind: str, kinds: dict[str, Kind], clients: dict[str, TestClient]
) -> None:
    client, k = clients[kind], kinds[kind]
    readout = attention(client, k)["readout"]
    served = served_forecast(client, k)
    np.testing.assert_allclose(terms_sum(readout), served, rtol=1e-5)
    np.testing.assert_allclose(readout["forecast"], served, rtol=1e-5)
    # the kernels and the direct lags regroup the lags' contributions
    kernels = sum(np.array(c["contribution"]) for c in readout["kernels"])
    np.testing.assert_allclose(
        kernels + np.array(readout["direct_lags"]["contribution"]),
        np.array(readout["lag_contributions"]).sum(0),
        rtol=1e-9,
        atol=1e-9 * float(np.abs(served).max()),
    )
    shares = [c["share"] for c in readout["kernels"]] + [readout["direct_lags"]["share"]]
    shares += [readout["missing"]["share"], readout["bias"]["share"]]
    shares += [c["share"] for c in readout["covariates"]]
    if kind == "lifted_readout":  # the random layer's part: one term, nonlinear in the window
        assert readout["lift"]["width"] == 64 and readout["lift"]["share"] > 0
        shares.append(readout["lift"]["share"])
    else:
        assert readout["lift"] is None
    assert all(s >= 0 for s in shares) and abs(sum(shares) - 1) < 1e-9


@pytest.mark.parametrize("kind", ["global_readout", "lifted_readout", "hybrid"])
def test_a_still_windows_explanation_says_it_is_held_and_adds_up_to_the_served_forecast(
    kind: str, kinds: dict[str, Kind], clients: dict[str, TestClient]
) -> None:
    """A constant series is forecast as its value (readout.hold_still): the explanation's `still` term
    takes the read-out's other terms there, and the parts still add up to the served forecast."""
    client, k = clients[kind], kinds[kind]
    n = len(k.body["series"]["values"])
    flat = Kind(k.repo, k.name, {"series": {**k.body["series"], "values": [250.0] * n}})
    body = attention(client, flat)
    readout, served = body["readout"], served_forecast(client, flat)
    np.testing.assert_allclose(served, 250.0, rtol=1e-6)
    np.testing.assert_allclose(readout["forecast"], 250.0, rtol=1e-12)
    np.testing.assert_allclose(terms_sum(readout), readout["forecast"], rtol=1e-9)
    assert readout["still"] is not None and readout["still"]["share"] > 0
    assert attention(client, k)["readout"]["still"] is None  # a window that changes
    if kind == "hybrid":  # every member holds it too (LocalSpec.feed), and says so
        hybrid = body["hybrid"]
        assert hybrid["held"] and hybrid["local_used"]
        for member in hybrid["members"]:
            np.testing.assert_allclose(member["forecast"], 250.0, rtol=1e-6, err_msg=member["name"])
        np.testing.assert_allclose(hybrid["forecast"], served, rtol=1e-6)
        assert not attention(client, k)["hybrid"]["held"]


def test_lag_weights_are_the_kernels_combined_by_the_read_outs_weights(
    kinds: dict[str, Kind], clients: dict[str, TestClient]
) -> None:
    k = kinds["global_readout"]
    model: GlobalModel = k.model
    readout = attention(clients["global_readout"], k)["readout"]
    cfg = model.config
    kernels = model.kernels()  # [K, L], the numpy model's, float64
    L = model.input_length
    lags = np.zeros((L, cfg.n_lags))
    lags[L - cfg.n_lags + np.arange(cfg.n_lags), np.arange(cfg.n_lags)] = 1.0
    want = np.concatenate([kernels.T, lags], 1) @ model.weights[: kernels.shape[0] + cfg.n_lags]
    np.testing.assert_allclose(readout["lag_weights"], want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    heads = [(h["kind"], h["lambda"], h["gamma"], h["theta"]) for h in readout["kernels"]]
    assert len(heads) == kernels.shape[0] and all(h[0] is not None for h in heads)
    assert all((h[1] is None) != (h[0] == "regular") for h in heads)  # λ for regular, γ/θ for cyclic
    # the numpy model's forecast of the same series, float64
    want_forecast = model.forecast([np.array(k.body["series"]["values"])])[0]
    np.testing.assert_allclose(readout["forecast"], want_forecast, rtol=1e-5)


def test_a_covariate_models_contributions_name_each_covariate(
    kinds: dict[str, Kind], clients: dict[str, TestClient]
) -> None:
    k = kinds["covariate_readout"]
    readout = attention(clients["covariate_readout"], k)["readout"]
    names = {(c["name"], c["kind"]) for c in readout["covariates"]}
    assert names == {("promo", "future"), ("dayofweek", "calendar"), ("size", "static")}
    promo = next(c for c in readout["covariates"] if c["name"] == "promo")
    assert promo["share"] > 0
    # flipping the promotions moves the forecast by what the promo's contribution said, twice over
    flipped = {**k.body["series"], "future": {"promo": [1 - p for p in k.body["series"]["future"]["promo"]]}}
    other = attention(clients["covariate_readout"], Kind(k.repo, k.name, {"series": flipped}))["readout"]
    promo2 = next(c for c in other["covariates"] if c["name"] == "promo")
    np.testing.assert_allclose(
        np.array(other["forecast"]) - np.array(readout["forecast"]),
        np.array(promo2["contribution"]) - np.array(promo["contribution"]),
        rtol=1e-6,
        atol=1e-6 * float(np.abs(readout["forecast"]).max()),
    )


def test_column_owners_cover_the_layout() -> None:
    layout = CovariateLayout(
        input_length=3, horizon=2, past=("a",), future=("b",), calendar=("dayofweek",), mean=(), std=()
    )
    owners = column_owners(layout)
    assert len(owners) == layout.width == 3 + 2 * 8
    assert owners[:3] == [("a", "past")] * 3 and owners[3] == ("b", "future")
    assert owners[4:11] == [("dayofweek", "calendar")] * 7


def test_a_hybrids_members_combine_into_its_served_forecast(
    kinds: dict[str, Kind], clients: dict[str, TestClient]
) -> None:
    client, k = clients["hybrid"], kinds["hybrid"]
    body = attention(client, k)
    hybrid, readout = body["hybrid"], body["readout"]
    served = served_forecast(client, k)
    assert hybrid["local_used"] and hybrid["season"] == 12  # monthly: no long period, the year
    members = hybrid["members"]
    assert members[0]["name"] == "readout" and members[0]["forecast"] == readout["forecast"]
    assert [m["name"] for m in members[1:]] == list(k.model.local.members)
    assert abs(sum(m["weight"] for m in members) - 1) < 1e-9
    combined = sum(m["weight"] * np.array(m["forecast"]) for m in members)
    np.testing.assert_allclose(hybrid["forecast"], combined, rtol=1e-12)
    np.testing.assert_allclose(hybrid["forecast"], served, rtol=1e-5)
    np.testing.assert_allclose(terms_sum(readout), readout["forecast"], rtol=1e-9)
    # a series too short for the local models: the read-out alone, weight 1
    short = {"values": k.body["series"]["values"][: k.model.local.min_values - 1]}
    alone = attention(client, Kind(k.repo, k.name, {"series": short}))["hybrid"]
    assert not alone["local_used"] and [m["weight"] for m in alone["members"]] == [1.0]
    assert alone["season"] is None


def test_a_networks_lag_effects_are_its_served_forecasts_finite_differences(
    kinds: dict[str, Kind], clients: dict[str, TestClient]
) -> None:
    client, k = clients[OLD_TRANSFORMER], kinds[OLD_TRANSFORMER]
    sens = attention(client, k)["sensitivity"]
    served = served_forecast(client, k)
    np.testing.assert_allclose(sens["forecast"], served, rtol=1e-6)
    weights = np.array(sens["lag_weights"])
    assert np.isfinite(weights).all() and np.abs(weights).max() > 0
    # moving the last value by one step of its scale moves the forecast by about its effect
    series = dict(k.body["series"])
    values = list(series["values"])
    delta = 0.01 * sens["scale"]
    values[-1] += delta
    moved = served_forecast(client, Kind(k.repo, k.name, {"series": {**series, "values": values}}))
    np.testing.assert_allclose(
        moved - served, weights[-1] * delta, rtol=0.05, atol=1e-3 * np.abs(served).max()
    )


def test_limits_and_errors_name_the_field(kinds: dict[str, Kind], clients: dict[str, TestClient]) -> None:
    client, k = clients["global_readout"], kinds["global_readout"]
    r = client.post(f"/v1/models/{k.name}/attention", json={**k.body, "layers": [0]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "layers"
    r = client.post(f"/v1/models/{k.name}/attention", json={**k.body, "channel": 1})
    assert r.status_code == 422 and "channel" in r.json()["error"]["field"]
    r = client.post(f"/v1/models/{k.name}/attention", json={"series": {"values": [1.0, 2.0]}})
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("series")
    # the one series is `series`, not an item of a list: a covariate it cannot take, or one missing
    unknown = {"series": {**k.body["series"], "future": {"price": [1.0] * 40}}}
    r = client.post(f"/v1/models/{k.name}/attention", json=unknown)
    assert r.status_code == 422 and r.json()["error"]["field"] == "series.future", r.text
    shops, body = clients["covariate_readout"], kinds["covariate_readout"].body
    series = {key: value for key, value in body["series"].items() if key != "static"}
    r = shops.post("/v1/models/shops/attention", json={**body, "series": series})
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("series.static"), r.text
    with running_client(make_settings(k.repo, models=[k.name], max_attention_values=10)) as small:
        r = small.post(f"/v1/models/{k.name}/attention", json=k.body)
    assert r.status_code == 422 and r.json()["error"]["field"] == "series"
    assert r.json()["error"]["limit"] == 10


def test_the_graphs_constants_are_read_without_onnx(kinds: dict[str, Kind]) -> None:
    k = kinds["global_readout"]
    graph = load_readout_graph(k.repo / NAME / "1" / "model.onnx")
    np.testing.assert_allclose(graph.readout, k.model.weights[:-1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(graph.bias, k.model.weights[-1], rtol=1e-6, atol=1e-7)
    assert graph.last == max(k.model.config.period, 1)
