"""`Client.explain` against a real service process serving a global read-out (issue 48): one series' frame
in, its forecast's terms as DataFrames out; the terms add up to /v1's forecast per horizon step. The
frames of a hybrid's members from an answer of that shape, and a multichannel answer refused."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from rsa_client import Client
from rsa_client.explain import explanation

from tests.app.live import LiveService, live_service
from tests.utils.panel import NAME, publish, store


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    folder = tmp_path_factory.mktemp("client-explain")
    repo, _ = publish(folder)
    with live_service(repo, folder / "service.log") as live:
        yield live


def test_explain_returns_the_terms_that_add_up_to_the_forecast(service: LiveService) -> None:
    values = store(7, 40)
    frame = pd.DataFrame({"ds": pd.date_range("2019-01-01", periods=40, freq="MS"), "y": values})
    with Client(service.url) as client:
        got = client.explain(frame.sample(frac=1.0, random_state=1), model=NAME)  # the client sorts
        served = client.forecast(frame.assign(unique_id="a"), model=NAME)
        spec = client.model(NAME)
    L, H = spec.input_length, spec.horizon
    assert got.lags.shape[0] == L * H and set(got.lags["step"]) == set(range(1, H + 1))
    assert list(got.lags["lag"][::H]) == list(range(L - 1, -1, -1))
    per_step = got.terms.groupby("step")["contribution"].sum()
    np.testing.assert_allclose(per_step.to_numpy(), got.forecast.to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(got.forecast.to_numpy(), served[NAME].to_numpy(), rtol=1e-5)
    lag_sum = got.lags.groupby("step")["contribution"].sum()
    others = got.terms[got.terms["kind"].isin(["missing", "bias"])].groupby("step")["contribution"].sum()
    np.testing.assert_allclose((lag_sum + others).to_numpy(), got.forecast.to_numpy(), rtol=1e-9)
    shares = got.terms.drop_duplicates("term")["share"]
    assert abs(float(shares.sum()) - 1) < 1e-9
    kernels = got.terms[got.terms["kind"] == "kernel"]
    assert kernels["lambda"].notna().any() and got.members.empty


# A read-out's answer of two lags and two steps, its terms adding up to its forecast.
READOUT = {
    "lag_weights": [[0.5, 0.25], [0.5, 0.75]],
    "values": [1.0, 2.0],
    "lag_contributions": [[1.0, 0.5], [2.0, 3.0]],
    "kernels": [],
    "direct_lags": {"lags": 2, "share": 0.8, "contribution": [3.0, 3.5]},
    "missing": {"value": 0.0, "share": 0.0, "contribution": [0.0, 0.0]},
    "bias": {"share": 0.2, "contribution": [1.0, 1.0]},
    "lift": None,
    "covariates": [],
    "forecast": [4.0, 4.5],
}


def test_a_hybrids_members_and_a_multichannel_answer() -> None:
    readout = READOUT
    members = [
        {"name": "readout", "kind": "global", "weight": 0.5, "forecast": [4.0, 4.5]},
        {"name": "theta", "kind": "local", "weight": 0.5, "forecast": [2.0, 2.5]},
    ]
    answer = {"model": "m", "readout": readout, "hybrid": {"members": members, "forecast": [3.0, 3.5]}}
    got = explanation(answer)
    assert list(got.members["member"]) == ["readout", "readout", "theta", "theta"]
    assert got.forecast.tolist() == [3.0, 3.5]  # the hybrid's combination
    with pytest.raises(ValueError, match=r"Client\.attention"):
        explanation({"model": "etth1-rsa", "layers": [{"layer": 0}]})


def test_a_random_layers_part_is_one_term_of_the_sum() -> None:
    readout = {
        **READOUT,
        "direct_lags": {"lags": 2, "share": 0.6, "contribution": [3.0, 3.5]},
        "lift": {"width": 64, "share": 0.2, "contribution": [0.5, -1.0]},
        "forecast": [4.5, 3.5],
    }
    got = explanation({"model": "m", "readout": readout, "hybrid": None})
    layer = got.terms[got.terms["kind"] == "lift"]
    assert layer["term"].unique().tolist() == ["random layer"] and layer["contribution"].tolist() == [
        0.5,
        -1.0,
    ]
    per_step = got.terms[got.terms["kind"] != "lags"].groupby("step")["contribution"].sum()
    lags = got.lags.groupby("step")["contribution"].sum()
    np.testing.assert_allclose((per_step + lags).to_numpy(), got.forecast.to_numpy())
