"""`Client.forecast` for a covariate model against a real service process: past covariates and statics
as columns of `df`, future ones in `X_df`, sent as OIP v2's named inputs; the answers are /v1's for the
same series and covariates; what is missing is refused before any forecast request, naming the series
and the column; a value the server refuses is named by its series."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from rsa_client import Client, ServiceError
from rsa_client.models import ModelLimits, ModelSpec
from rsa_client.series import _covariate_tensors

from tests.app.live import LiveService, live_service
from tests.utils.shops import NAME, H, Shops, publish_shops, v1_series

# These backtests score the served weights on purpose (`refit=False`, or windows before any training
# window): the client's in-sample warning is expected here (tests/client/test_cross_validation_refit.py).
pytestmark = pytest.mark.filterwarnings("ignore:.*backtest windows begin at or before:UserWarning")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveService, Shops]]:
    folder = tmp_path_factory.mktemp("client-covariates")
    shops = publish_shops(folder, short=False)  # a shorter shop: test_short_series_client.py
    env = {"RSA_MODEL_CONTROL": "explicit"}
    with live_service(shops.repository, folder / "service.log", **env) as service:
        yield service, shops


def v1_answers(url: str, shops: Shops, level: list[float]) -> dict[str, Any]:
    series = v1_series(shops.history, shops.future)
    body = {"series": series, **({"level": level} if level else {})}
    r = httpx.post(f"{url}/v1/models/{NAME}/forecast", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return {f["id"]: f for f in r.json()["forecasts"]}


def test_covariate_forecasts_are_v1s(served: tuple[LiveService, Shops]) -> None:
    """One request of every shop, as /v1's: every value equal."""
    service, shops = served
    with Client(service.url, concurrency=1) as client:
        level = client.model(NAME).levels[:1]
        assert level, "the model was exported with intervals"
        df = shops.history.sample(frac=1.0, random_state=2)  # the client sorts
        out = client.forecast(df, model=NAME, level=level, X_df=shops.future)
    expected = v1_answers(service.url, shops, level)
    assert sorted(out["unique_id"].unique()) == sorted(expected) and len(out) == len(expected) * H
    v = f"{level[0]:g}"
    for sid, rows in out.groupby("unique_id"):
        want = expected[sid]
        stamps = pd.to_datetime(want["timestamps"]).tz_convert(None)
        assert (rows["ds"].to_numpy() == stamps.to_numpy()).all()
        for suffix, key in (("", "forecast"), (f"-lo-{v}", f"lo-{v}"), (f"-hi-{v}", f"hi-{v}")):
            got = rows[f"{NAME}{suffix}"].to_numpy()  # named after the model
            want_key = np.asarray(want[key], np.float32)[:, 0]
            np.testing.assert_array_equal(got, want_key, err_msg=f"{sid} {key}")
    # the covariates are sent: other promotions give another forecast
    flipped = shops.future.assign(promo=1 - shops.future["promo"])
    with Client(service.url, concurrency=1) as client:
        other = client.forecast(shops.history, model=NAME, X_df=flipped, h=3)
    assert len(other) == len(expected) * 3
    assert not np.array_equal(other[NAME].to_numpy(), out.groupby("unique_id").head(3)[NAME].to_numpy())


def test_a_zoned_models_naive_times_are_read_in_its_zone(tmp_path: Path) -> None:
    """A model trained in Bogotá's zone: the client reads a naive `ds` there, as /v1 reads a naive start
    (its `start` input and X_df's times as instants of that zone; read as UTC, every midnight would be the
    day before and the day-of-week calendar a day off), and answers in its wall clock."""
    shops = publish_shops(tmp_path, n=3, short=False, timezone="America/Bogota")
    with live_service(shops.repository, tmp_path / "service.log") as service:
        with Client(service.url, concurrency=1) as client:
            out = client.forecast(shops.history, model=NAME, X_df=shops.future)
            # the served weights: each shop's request below answers as the client's of every shop
            # (a refit reads every series of its request)
            backtest = client.cross_validation(shops.history, h=H, n_windows=2, model=NAME, refit=False)
        expected = v1_answers(service.url, shops, [])
        # The backtest's windows too: the client cuts them from naive times read in the zone, /v1 from
        # the naive start it reads there (both rules in UTC would agree with each other, not with the zone).
        for sid, rows in shops.history.sort_values(["unique_id", "ds"]).groupby("unique_id"):
            series = {
                "id": sid,
                "start": rows["ds"].iloc[0].isoformat(),
                "values": rows["y"].tolist(),
                "future": {"promo": rows["promo"].astype(float).tolist()},
                "past": {"footfall": rows["footfall"].tolist()},
                "static": {"size": rows["size"].iloc[0]},
            }
            body = {"series": [series], "horizon": H, "n_windows": 2, "refit": False}
            r = httpx.post(f"{service.url}/v1/models/{NAME}/cross_validation", json=body, timeout=120)
            assert r.status_code == 200, r.text
            windows = r.json()["series"][0]["windows"]
            want = np.concatenate([np.array(w["forecast"])[:, 0] for w in windows])
            got = backtest[backtest["unique_id"] == sid][NAME].to_numpy()
            np.testing.assert_allclose(got, want, rtol=1e-6)
    for sid, rows in out.groupby("unique_id"):
        want = expected[sid]
        assert want["timestamps"][0].endswith("-05:00")
        stamps = pd.to_datetime([t[:19] for t in want["timestamps"]])
        assert (rows["ds"].to_numpy() == stamps.to_numpy()).all()
        np.testing.assert_array_equal(rows[NAME].to_numpy(), np.asarray(want["forecast"], np.float32)[:, 0])


def _drop_last_of_shop_2(f: pd.DataFrame) -> pd.DataFrame:
    return f.drop(f.index[f["unique_id"] == "shop_2"][-1:])


def _late(f: pd.DataFrame) -> pd.DataFrame:
    return f.assign(ds=f["ds"] + pd.to_timedelta((f["unique_id"] == "shop_2") * 1, unit="D"))


def _nan(f: pd.DataFrame) -> pd.DataFrame:
    f = f.copy()
    f.loc[f.index[f["unique_id"] == "shop_2"][3], "promo"] = np.nan
    return f


def _size(value: Any, sid: str = "shop_3", last: bool = False) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def change(d: pd.DataFrame) -> pd.DataFrame:
        d = d.copy()
        at = d.index[d["unique_id"] == sid]
        d.loc[at[-1:] if last else at, "size"] = value
        return d

    return change


SAME = lambda f: f  # noqa: E731


@pytest.mark.parametrize(
    ("df_change", "x_change", "words"),
    [
        (SAME, None, r"reads the future covariates \['promo'\]: give X_df"),
        (SAME, lambda f: f[f["unique_id"] != "shop_2"], r"series 'shop_2' has 0 rows in X_df"),
        (SAME, _drop_last_of_shop_2, r"series 'shop_2' has 6 rows in X_df; model shops needs"),
        (SAME, _late, r"series 'shop_2': X_df's row 0 is at 2023-05-16 00:00:00"),
        (SAME, _nan, r"series 'shop_2': X_df's 'promo' at 2023-05-18 00:00:00 is not a number"),
        (SAME, lambda f: f.assign(price=1.0), r"X_df's column 'price' is not a future covariate"),
        (SAME, lambda f: f.drop(columns="promo"), r"X_df has no column 'promo'"),
        (lambda d: d.drop(columns="footfall"), SAME, r"df has no column 'footfall'"),
        (_size("other", last=True), SAME, r"series 'shop_3': static covariate 'size' must hold one value"),
        (_size("huge"), SAME, r"series 'shop_3': static covariate 'size' is 'huge', not one of"),
        (lambda d: d[d["unique_id"] != "shop_1"], SAME, r"X_df holds series that df does not: \['shop_1'\]"),
    ],
)
def test_missing_covariates_are_refused_before_any_request(
    served: tuple[LiveService, Shops],
    monkeypatch: pytest.MonkeyPatch,
    df_change: Any,
    x_change: Any,
    words: str,
) -> None:
    service, shops = served
    with Client(service.url) as client:

        def no_request(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a forecast request was sent")

        monkeypatch.setattr(client, "_infer", no_request)
        X_df = None if x_change is None else x_change(shops.future)
        with pytest.raises(ValueError, match=words):
            client.forecast(df_change(shops.history), model=NAME, X_df=X_df)


def test_a_value_the_server_refuses_is_named_by_its_series(served: tuple[LiveService, Shops]) -> None:
    """An infinite past value passes the client (NaN is a value not observed, inf is not) and the server
    refuses it naming the window: the error names that series."""
    service, shops = served
    df = shops.history.copy()
    df.loc[df.index[df["unique_id"] == "shop_4"][-1], "footfall"] = np.inf
    with Client(service.url) as client, pytest.raises(ServiceError) as caught:
        client.forecast(df, model=NAME, X_df=shops.future)
    assert caught.value.status == 400 and caught.value.series == ["shop_4"], str(caught.value)
    assert "past.footfall" in caught.value.message


def test_x_df_for_a_model_without_covariates_is_refused(served: tuple[LiveService, Shops]) -> None:
    _, shops = served
    spec = ModelSpec("plain", 1, ["y"], 28, H, "D", 86400.0, False, [], ModelLimits(10, 2**20))
    empty = np.array([], np.int64)
    with pytest.raises(ValueError, match="takes no covariates; X_df would not be read"):
        _covariate_tensors(spec, shops.history, shops.future, empty, empty, empty, empty, "unique_id", "ds")


def test_explain_reads_the_covariates_as_forecast_does(served: tuple[LiveService, Shops]) -> None:
    """`explain` of one shop with its covariates as `forecast` takes them (past and static columns of
    `df`, the future in `X_df`): its terms add up to the forecast that `forecast` answers for the same
    frame. Before, explain took /v1's dicts alone (`future=`, `past=`, `static=`)."""
    service, shops = served
    one = shops.history[shops.history["unique_id"] == "shop_1"]
    future = shops.future[shops.future["unique_id"] == "shop_1"]
    with Client(service.url, concurrency=1) as client:
        got = client.explain(one, model=NAME, X_df=future)
        served_forecast = client.forecast(one, model=NAME, X_df=future)[NAME].to_numpy()
        without_id = client.explain(
            one.drop(columns="unique_id"), model=NAME, X_df=future.drop(columns="unique_id")
        )
        with pytest.raises(ValueError, match=r"reads the future covariates \['promo'\]: give their values"):
            client.explain(one, model=NAME)
        with pytest.raises(ValueError, match="not both"):
            client.explain(one, model=NAME, X_df=future, static={"size": "large"})
    np.testing.assert_allclose(got.forecast.to_numpy(), served_forecast, rtol=1e-5)
    np.testing.assert_allclose(without_id.forecast.to_numpy(), got.forecast.to_numpy(), rtol=1e-9)
    assert {"future", "past", "static"} <= set(got.terms["kind"]), set(got.terms["kind"])
