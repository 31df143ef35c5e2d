"""The client's `cross_validation` and `detect_anomalies` on a covariate model (issue 36): the frame's
other columns are the covariates (statsforecast's convention), `X_df` the future ones past the history;
each answer is /v1's for the same histories with the same covariates. The model and the in-process
service are tests/export/test_covariates_served.py's (the client's httpx session is its TestClient)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rsa_client import Client

from tests.app.protocols.rsa_v1.test_evaluation_covariates import history_series
from tests.export.test_covariates_served import NAME, Served, served

__all__ = ["served"]

H, N = 7, 100  # the shops model's horizon; rows of history per series
SHOPS = ("shop_0", "shop_3")

# These backtests score the served weights on purpose (`refit=False`, or windows before any training
# window): the client's in-sample warning is expected here (tests/client/test_cross_validation_refit.py).
pytestmark = pytest.mark.filterwarnings("ignore:.*backtest windows begin at or before:UserWarning")


@pytest.fixture()
def client(served: Served) -> Iterator[Client]:
    c = Client("http://testserver", concurrency=1)
    c.http = served.client  # a TestClient is an httpx.Client on the app
    yield c


def frame_of(served: Served, after: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The shops' first N rows (target and covariates) and their next `after` promotions as X_df."""
    parts, later = [], []
    for sid in SHOPS:
        s = served.shops[sid]
        parts.append(
            pd.DataFrame(
                {
                    "unique_id": sid,
                    "ds": s["stamps"][:N],
                    "y": s["y"][:N],
                    "promo": s["promo"][:N],
                    "footfall": s["footfall"][:N],
                    "size": s["size"],
                }
            )
        )
        later.append(
            pd.DataFrame(
                {"unique_id": sid, "ds": s["stamps"][N : N + after], "promo": s["promo"][N : N + after]}
            )
        )
    return pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=1), pd.concat(later)


def v1(served: Served, route: str, body: dict[str, Any]) -> dict[str, Any]:
    r = served.client.post(f"/v1/models/{NAME}/{route}", json=body)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


@pytest.mark.parametrize("h", [H, 3])
def test_cross_validation_sends_the_frames_covariates(served: Served, client: Client, h: int) -> None:
    df, later = frame_of(served, after=H - h)
    # refit False: the served weights, so that one shop's request answers as two shops' do (a refit reads
    # every series of its request: tests/app/protocols/rsa_v1/test_refit_covariates.py)
    kw = {"X_df": later if h < H else None, "refit": False}
    out = client.cross_validation(df, h=h, n_windows=2, model=NAME, **kw)
    for sid in SHOPS:
        series = [history_series(served.shops[sid], sid, N, H - h)]
        body = {"series": series, "horizon": h, "n_windows": 2, "refit": False}
        body["series"][0]["start"] += "T00:00:00+00:00"
        want = np.concatenate(
            [
                np.array(w["forecast"])[:, 0]
                for w in v1(served, "cross_validation", body)["series"][0]["windows"]
            ]
        )
        np.testing.assert_allclose(out[out["unique_id"] == sid][NAME].to_numpy(), want, rtol=1e-6)


def test_detect_anomalies_sends_the_frames_covariates(served: Served, client: Client) -> None:
    df, later = frame_of(served, after=H - 1)
    out = client.detect_anomalies(df, model=NAME, last=4, repair=False, X_df=later)
    for sid in SHOPS:
        body = {"series": [history_series(served.shops[sid], sid, N, H - 1)], "last": 4, "repair": False}
        result = v1(served, "detect_anomalies", body)["series"][0]
        got = out[out["unique_id"] == sid]
        np.testing.assert_allclose(got[NAME].to_numpy(), np.array(result["forecast"])[:, 0], rtol=1e-6)


def test_no_x_df_sends_the_history_alone(served: Served, client: Client) -> None:
    """Issue 45 item 4: without X_df the future covariates past each history (steps the answer does not
    show) are not sent, and the answers are /v1's for the history alone (read there as the training
    mean)."""
    df, _ = frame_of(served)
    out = client.cross_validation(df, h=3, n_windows=2, model=NAME, refit=False)
    forecast = NAME if NAME in out.columns else "forecast"  # the model-named column (issue 45 item 8)
    flags = client.detect_anomalies(df, model=NAME, last=4, repair=False)
    for sid in SHOPS:
        series = [history_series(served.shops[sid], sid, N)]
        body = {"series": series, "horizon": 3, "n_windows": 2, "refit": False}
        body["series"][0]["start"] += "T00:00:00+00:00"
        windows = v1(served, "cross_validation", body)["series"][0]["windows"]
        assert windows[-1]["future_unsent"] == H - 3
        want = np.concatenate([np.array(w["forecast"])[:, 0] for w in windows])
        np.testing.assert_allclose(out[out["unique_id"] == sid][forecast].to_numpy(), want, rtol=1e-6)
        body = {"series": [history_series(served.shops[sid], sid, N)], "last": 4, "repair": False}
        result = v1(served, "detect_anomalies", body)["series"][0]
        got = flags[flags["unique_id"] == sid][forecast].to_numpy()
        np.testing.assert_allclose(got, np.array(result["forecast"])[:, 0], rtol=1e-6)


def test_detect_anomalies_says_the_steps_unsent_in_every_pass(served: Served, client: Client) -> None:
    """Issue 45: the frame's `future_unsent` column is /v1's per checked point, with the repair on (a
    point forecast again from an earlier window counts what that window read) and off; 0 where the
    answer holds none (X_df sent)."""
    df, later = frame_of(served, after=H - 1)
    sid = SHOPS[0]
    spiked = df.copy()
    at = spiked.index[(spiked["unique_id"] == sid) & (spiked["ds"] == served.shops[sid]["stamps"][N - 3])]
    spiked.loc[at, "y"] *= 3
    for repair in (True, False):
        flags = client.detect_anomalies(spiked, model=NAME, last=4, repair=repair)
        body = {"series": [history_series(served.shops[sid], sid, N)], "last": 4, "repair": repair}
        body["series"][0]["values"][N - 3] *= 3
        result = v1(served, "detect_anomalies", body)["series"][0]
        assert result["anomaly"][1] == [True]
        got = flags[flags["unique_id"] == sid]["future_unsent"].tolist()
        assert got == result["future_unsent"] and max(got) == H - 1
    sent = client.detect_anomalies(df, model=NAME, last=4, repair=False, X_df=later)
    assert (sent["future_unsent"] == 0).all()


def test_fit_forecast_sends_the_frames_covariates(served: Served, client: Client) -> None:
    """Issue 45, item 2: a covariate model refitted from the client: the frame's other columns over the
    history, X_df's promotions over the h days forecast; the answer is /v1 fit_forecast's for the same
    histories in one request."""
    df, later = frame_of(served, after=3)
    out = client.fit_forecast(df, h=3, model=NAME, X_df=later)
    series = [history_series(served.shops[sid], sid, N, 3) for sid in SHOPS]
    for s in series:
        s["start"] += "T00:00:00+00:00"
        s["values"] = [[v] for v in s["values"]]
    answer = v1(served, "fit_forecast", {"series": series, "horizon": 3})
    want = np.concatenate([np.array(f["forecast"])[:, 0] for f in answer["forecasts"]])
    column = NAME if NAME in out.columns else "y"  # the model-named column (item 8)
    np.testing.assert_allclose(out[column].to_numpy(), want, rtol=1e-6)
    # no X_df: the h days' promotions missing, said before any request (the server's 422 named
    # `series[0].future.promo`, a field the client's user never wrote)
    with pytest.raises(ValueError, match=r"reads the future covariates \['promo'\]: give .* as X_df"):
        client.fit_forecast(df, h=3, model=NAME)


def test_columns_and_rows_the_model_cannot_read_are_refused_before_any_request(
    served: Served, client: Client
) -> None:
    """A column the model does not read (`price`) is said in a UserWarning and left unread, as `forecast`
    leaves it (the rule of every call: `rsa_client.series.unread_columns`); a covariate the model reads
    missing, or a static that varies, is refused before any request."""
    df, _ = frame_of(served)
    with pytest.warns(UserWarning, match=r"columns \['price'\] are not read: .*covariates are .*'footfall'"):
        priced = client.cross_validation(df.assign(price=1.0), model=NAME)
    pd.testing.assert_frame_equal(priced, client.cross_validation(df, model=NAME))
    with pytest.raises(ValueError, match=r"lacks \['footfall'\]"):
        client.cross_validation(df.drop(columns="footfall"), model=NAME)
    with pytest.raises(ValueError, match="static covariate 'size' must have one value"):
        client.cross_validation(df.assign(size=np.where(np.arange(len(df)) % 2, "big", "small")), model=NAME)


def test_a_backtests_x_df_is_checked_as_a_forecasts(served: Served, client: Client) -> None:
    """X_df's rows must be exactly the steps the last window reads past each history (a row elsewhere was
    appended as if it were the next), every value a number, no column or series df lacks; an X_df nothing
    reads is refused, and a static must hold one value (a NaN among them too): all before any request."""
    df, later = frame_of(served, after=H - 3)
    shifted = later.assign(ds=later["ds"] - pd.Timedelta(days=400))
    with pytest.raises(ValueError, match=r"series 'shop_0': X_df's row 0 is at"):
        client.cross_validation(df, h=3, model=NAME, X_df=shifted)
    with pytest.raises(
        ValueError, match=r"series 'shop_0' has 3 rows in X_df; model shops needs .* exactly the 4"
    ):
        client.cross_validation(df, h=3, model=NAME, X_df=later.groupby("unique_id").head(3))
    stray = pd.concat([later, later.assign(unique_id="shop_9")])
    with pytest.raises(ValueError, match=r"X_df holds series that df does not: \['shop_9'\]"):
        client.cross_validation(df, h=3, model=NAME, X_df=stray)
    with pytest.raises(ValueError, match="X_df's column 'price' is not a future covariate"):
        client.cross_validation(df, h=3, model=NAME, X_df=later.assign(price=1.0))
    with pytest.raises(
        ValueError, match="reads no future value past the history here; X_df would not be read"
    ):
        client.cross_validation(df, model=NAME, X_df=later)
    nan_size = df.assign(size=df["size"].where(np.arange(len(df)) % 7 != 0))
    with pytest.raises(ValueError, match="static covariate 'size' must have one value per series"):
        client.cross_validation(nan_size, h=3, model=NAME, X_df=later)
