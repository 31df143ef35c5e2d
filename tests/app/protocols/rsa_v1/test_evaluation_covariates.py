"""`/v1` cross_validation and detect_anomalies of a covariate model (issue 36): each series' covariates sent
over its whole history, each window's cut from them; every window's forecast equals `/v1` forecast of
that window alone with the same covariates, and bad covariates are 422s naming the field. The model is
tests/export/test_covariates_served.py's shops (future promo, past footfall, static size, day of week)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.export.test_covariates_served import DAYS, NAME, Served, request_series, served

__all__ = ["served"]  # the module fixture: trained and exported once for this file

H = 7  # the shops model's horizon
CV = f"/v1/models/{NAME}/cross_validation"
ANOMALIES = f"/v1/models/{NAME}/detect_anomalies"


def history_series(s: dict[str, Any], sid: str, n: int, reach: int = 0) -> dict[str, Any]:
    """Shop `sid`'s first n values with its covariates over them (the future ones `reach` further)."""
    return {
        "id": sid,
        "start": s["stamps"][0].date().isoformat(),
        "values": s["y"][:n].tolist(),
        "future": {"promo": s["promo"][: n + reach].tolist()},
        "past": {"footfall": s["footfall"][:n].tolist()},
        "static": {"size": s["size"]},
    }


def forecast_of(served: Served, s: dict[str, Any], sid: str, cutoff: int) -> np.ndarray:
    """`/v1` forecast [H] of the values before `cutoff`, with the covariates of that window alone."""
    r = served.client.post(f"/v1/models/{NAME}/forecast", json={"series": [request_series(s, sid, cutoff)]})
    assert r.status_code == 200, r.text
    return np.array(r.json()["forecasts"][0]["forecast"])[:, 0]


def test_a_backtest_with_covariates_equals_the_forecasts_of_its_windows(served: Served) -> None:
    shops = {sid: served.shops[sid] for sid in ("shop_0", "shop_3")}
    n, k = DAYS - 5, 3
    body = {
        "series": [history_series(s, sid, n) for sid, s in shops.items()],
        "n_windows": k,
        "step_size": 4,
        "level": [80],
        "refit": False,  # the served weights (a refit: tests/app/protocols/rsa_v1/test_refit_covariates.py)
    }
    r = served.client.post(CV, json=body)
    assert r.status_code == 200, r.text
    for (sid, s), result in zip(shops.items(), r.json()["series"], strict=True):
        assert [w["cutoff"] for w in result["windows"]] == [n - H - 8, n - H - 4, n - H]
        for w in result["windows"]:
            got = np.array(w["forecast"])[:, 0]
            np.testing.assert_allclose(got, forecast_of(served, s, sid, w["cutoff"]), rtol=1e-5, atol=1e-4)
            np.testing.assert_array_equal(np.array(w["actual"])[:, 0], s["y"][w["cutoff"] : w["cutoff"] + H])
    # The promotions are read: flipping them over the history moves the backtest's forecasts.
    flipped = history_series(shops["shop_0"], "shop_0", n)
    flipped["future"]["promo"] = [1.0 - p for p in flipped["future"]["promo"]]
    again = served.client.post(CV, json={**body, "series": [flipped]}).json()["series"][0]["windows"]
    first = r.json()["series"][0]["windows"]
    assert not np.allclose(again[-1]["forecast"], first[-1]["forecast"])


def promo_mean(served: Served) -> float:
    """The training mean of `promo`: the value a future step not sent is read as."""
    layout = served.model.covariates
    assert layout is not None and layout.future == ("promo",)
    return layout.mean[layout.input_length * len(layout.past)]  # the first future column: promo


def with_future_tail(s: dict[str, Any], n: int, value: float) -> dict[str, Any]:
    """Shop s with its promotions from day n on replaced by `value`."""
    promo = s["promo"].copy()
    promo[n:] = value
    return dict(s, promo=promo)


def test_a_shorter_horizon_reads_the_future_covariates_past_the_history(served: Served) -> None:
    """h < H: the last window's forecast still reads the model's H future steps; the H − h after the
    history may be sent (the forecast /forecast gives with them) or not (read as the training mean, as
    /forecast gives with that value there, and counted in `future_unsent`), issue 45 item 4; fewer than
    one per value, or more than H − h after them, is refused naming the field and the length."""
    s, n, h = served.shops["shop_1"], DAYS - 10, 3
    body = {
        "series": [history_series(s, "shop_1", n, reach=H - h)],
        "horizon": h,
        "n_windows": 2,
        "refit": False,  # the served weights, each window's forecast /forecast's
    }
    r = served.client.post(CV, json=body)
    assert r.status_code == 200, r.text
    sent = r.json()["series"][0]["windows"]
    for w in sent:
        want = forecast_of(served, s, "shop_1", w["cutoff"])[:h]
        np.testing.assert_allclose(np.array(w["forecast"])[:, 0], want, rtol=1e-5, atol=1e-4)
        assert "future_unsent" not in w
    r = served.client.post(CV, json={**body, "series": [history_series(s, "shop_1", n)]})
    assert r.status_code == 200, r.text
    windows = r.json()["series"][0]["windows"]
    mean = with_future_tail(s, n, promo_mean(served))
    for w in windows:
        unsent = max(0, w["cutoff"] + H - n)
        assert w.get("future_unsent", 0) == unsent
        want = forecast_of(served, mean, "shop_1", w["cutoff"])[:h]
        np.testing.assert_allclose(np.array(w["forecast"])[:, 0], want, rtol=1e-5, atol=1e-4)
    assert windows[-1]["future_unsent"] == H - h
    assert windows[-1]["actual"] == sent[-1]["actual"]
    for values, limit in ((s["promo"][: n - 1], n), (s["promo"][: n + H - h + 1], n + H - h)):
        series = history_series(s, "shop_1", n)
        series["future"]["promo"] = values.tolist()
        r = served.client.post(CV, json={**body, "series": [series]})
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["field"] == "series[0].future.promo" and error["limit"] == limit, error
        assert "training mean" in error["message"], error


def test_a_one_step_anomaly_check_needs_no_covariate_past_the_history(served: Served) -> None:
    """Issue 45 item 4: `lead` 1 over n values asks n future values, not n + H − 1; each checked point's
    forecast is /forecast's with the promotions not sent at the training mean, and `future_unsent`
    counts them per point."""
    s, n, last = served.shops["shop_4"], DAYS - H, 9
    body = {"series": [history_series(s, "shop_4", n)], "last": last, "repair": False}
    r = served.client.post(ANOMALIES, json=body)
    assert r.status_code == 200, r.text
    result = r.json()["series"][0]
    unsent = [max(0, t + H - n) for t in result["index"]]
    assert result["future_unsent"] == unsent and unsent[-1] == H - 1 and unsent[0] == 0
    mean = with_future_tail(s, n, promo_mean(served))
    for t, forecast in zip(result["index"], result["forecast"], strict=True):
        np.testing.assert_allclose(
            forecast[0], forecast_of(served, mean, "shop_4", t)[0], rtol=1e-5, atol=1e-4
        )
    full = served.client.post(
        ANOMALIES, json={**body, "series": [history_series(s, "shop_4", n, reach=H - 1)]}
    ).json()["series"][0]
    assert "future_unsent" not in full
    early = [k for k, u in enumerate(unsent) if u == 0]  # windows that read no step past the history
    np.testing.assert_allclose(
        np.array(result["forecast"])[early], np.array(full["forecast"])[early], rtol=1e-6
    )


def test_an_anomaly_check_with_covariates_forecasts_each_point_as_forecast_does(served: Served) -> None:
    s, n, last = served.shops["shop_2"], DAYS - H, 3
    body = {"series": [history_series(s, "shop_2", n, reach=H - 1)], "last": last, "repair": False}
    r = served.client.post(ANOMALIES, json=body)
    assert r.status_code == 200, r.text
    result = r.json()["series"][0]
    assert result["index"] == list(range(n - last, n))
    for t, forecast in zip(result["index"], result["forecast"], strict=True):
        np.testing.assert_allclose(forecast[0], forecast_of(served, s, "shop_2", t)[0], rtol=1e-5, atol=1e-4)
    # A spike is flagged; the repair pass forecasts the points after it again with the same covariates.
    spiked = history_series(s, "shop_2", n, reach=H - 1)
    spiked["values"][n - 3] *= 3
    r = served.client.post(ANOMALIES, json={"series": [spiked], "last": last})
    assert r.status_code == 200, r.text
    answer = r.json()["series"][0]
    assert answer["anomaly"][0] == [True]
    # The spike is replaced by its forecast, and the points after it are those of /v1 forecast on the
    # repaired history with the covariates as sent; the point right after it, whose window would end with
    # the replaced value, from the window before the spike, two steps ahead (docs/backtest.md, Repair).
    repaired = dict(s, y=np.array(spiked["values"], dtype=float))
    repaired["y"][n - 3] = answer["forecast"][0][0]
    for k, t in enumerate(answer["index"][1:], start=1):
        want = (
            forecast_of(served, repaired, "shop_2", t - 1)[1]
            if k == 1
            else forecast_of(served, repaired, "shop_2", t)[0]
        )
        np.testing.assert_allclose(answer["forecast"][k][0], want, rtol=1e-5, atol=1e-4)


def test_future_unsent_counts_the_window_of_the_forecast_shown_in_every_pass(served: Served) -> None:
    """Issue 45: with the repair, a point whose window would end with a replaced spike is forecast again
    from the window before it, two steps ahead; its `future_unsent` is what that window read past the
    history (one step fewer than the first pass's), and its forecast is /forecast's from that window
    with the promotions not sent at the training mean."""
    s, n, last = served.shops["shop_2"], DAYS - H, 3
    spiked = history_series(s, "shop_2", n)  # no promotion past the history: read as the training mean
    spiked["values"][n - 3] *= 3
    r = served.client.post(ANOMALIES, json={"series": [spiked], "last": last, "repair": False})
    assert r.status_code == 200, r.text
    first = r.json()["series"][0]
    assert first["anomaly"][0] == [True]
    assert first["future_unsent"] == [t + H - n for t in first["index"]] == [4, 5, 6]
    r = served.client.post(ANOMALIES, json={"series": [spiked], "last": last})
    assert r.status_code == 200, r.text
    answer = r.json()["series"][0]
    assert answer["anomaly"][0] == [True]
    # Point n − 2 from the window ending before the spike (cutoff n − 3, two steps ahead), n − 1 from the
    # repaired window (cutoff n − 1, one step): the steps each shown forecast read past the n values.
    assert answer["future_unsent"] == [4, 4, 6]
    repaired = with_future_tail(dict(s, y=np.array(spiked["values"], dtype=float)), n, promo_mean(served))
    repaired["y"][n - 3] = answer["forecast"][0][0]
    want = forecast_of(served, repaired, "shop_2", n - 3)[1]
    np.testing.assert_allclose(answer["forecast"][1][0], want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda b: b["future"].update(promo=[1.0] * 50), "series[0].future.promo", "needs 120"),
        (lambda b: b["future"].update(price=[1.0] * 120), "series[0].future.price", "no future covariate"),
        (lambda b: b.pop("future"), "series[0].future.promo", "missing"),
        (lambda b: b["past"].update(footfall=[1.0] * 119), "series[0].past.footfall", "one per value"),
        (lambda b: b["past"].update(footfall=[1.0] * 121), "series[0].past.footfall", "needs 120"),
        (lambda b: b.pop("past"), "series[0].past.footfall", "missing"),
        (lambda b: b["static"].update(size="huge"), "series[0].static.size", "training categories"),
        (lambda b: b.pop("static"), "series[0].static.size", "missing"),
        (lambda b: b.pop("start"), "series[0].start", "calendar"),
    ],
)
@pytest.mark.parametrize("route", [CV, ANOMALIES])
def test_bad_covariates_are_refused_naming_the_field(
    served: Served, route: str, change: Any, field: str, words: str
) -> None:
    body = history_series(served.shops["shop_0"], "shop_0", 120)
    if route == ANOMALIES:  # lead 1 may send H − 1 future values past the history; none short here
        body["future"]["promo"] = served.shops["shop_0"]["promo"][: 120 + H - 1].tolist()
    change(body)
    r = served.client.post(
        route, json={"series": [body], "n_windows": 2} if route == CV else {"series": [body]}
    )
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == field and words in error["message"], error


def test_a_wrong_covariate_type_is_refused_by_the_schema(served: Served) -> None:
    body = history_series(served.shops["shop_0"], "shop_0", 120)
    body["future"]["promo"][3] = "yes"
    r = served.client.post(CV, json={"series": [body]})
    assert r.status_code == 422, r.text
    assert "series[0].future.promo[3]" in r.text or "future.promo.3" in r.text
