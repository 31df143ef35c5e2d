"""`/v1` cross_validation (backtests) and detect_anomalies: the answers against ONNX Runtime run directly
and metrics computed here by hand, the shipped model's backtest against the offline evaluator
(export/backtest.py) on a slice of the ETTh1 test split, and every refusal's field and limit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import make_settings, ort_forecast, running_client
from tests.app.fakes import ToySpec, intervals_block, write_version
from tests.app.protocols.conftest import shipped_latest

LEVELS = [50.0, 80.0, 90.0, 95.0, 99.0]
L, H, C = 8, 4, 3
MAX_WINDOWS = 16  # RSA_MAX_SERIES_PER_REQUEST here: forecasts per request
TOY = "/v1/models/toy"


def widths() -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.sort(rng.uniform(0.05, 3.0, size=(len(LEVELS), H, C)), axis=0).astype(np.float32)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("evaluation_repo")
    block = intervals_block(LEVELS, widths().astype(np.float64))
    write_version(repo, ToySpec(version=1))  # exported before intervals
    write_version(repo, ToySpec(version=2, manifest_overrides={"intervals": block}))
    latest = shipped_latest()
    (repo / "etth1-rsa").mkdir()
    (repo / "etth1-rsa" / latest.name).symlink_to(latest, target_is_directory=True)
    return repo


@pytest.fixture(scope="module")
def client(repository: Path) -> Iterator[TestClient]:
    with running_client(make_settings(repository, max_series_per_request=MAX_WINDOWS)) as c:
        yield c


def history(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(10, 3, size=(n, C)).round(3)


def toy_forecast(repository: Path, windows: np.ndarray) -> np.ndarray:
    return ort_forecast(repository / "toy" / "2" / "model.onnx", np.asarray(windows, np.float32))


def error_of(r: Any) -> tuple[str, Any]:
    error = r.json()["error"]
    return error["field"], error["limit"]


# -- cross_validation -----------------------------------------------------------------------------------


def test_each_cutoff_is_forecast_from_the_values_before_it_beside_the_actuals(
    client: TestClient, repository: Path
) -> None:
    values = [history(20, 0), history(23, 1)]
    h, k, step = 3, 3, 2
    body = {
        "series": [{"id": f"s{i}", "values": v.tolist()} for i, v in enumerate(values)],
        "horizon": h,
        "n_windows": k,
        "step_size": step,
        "level": [80],
    }
    r = client.post(f"{TOY}/cross_validation", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["version"], answer["horizon"], answer["n_windows"], answer["step_size"]) == (2, h, k, step)
    w80 = widths()[LEVELS.index(80.0), :h]
    errors, inside, scaled = [], [], []
    for v, series in zip(values, answer["series"], strict=True):
        n = len(v)
        cutoffs = [n - h - step * (k - 1 - j) for j in range(k)]
        assert [w["cutoff"] for w in series["windows"]] == cutoffs
        want = toy_forecast(repository, np.stack([v[t - L : t] for t in cutoffs]))[:, :h]
        naive = np.abs(np.diff(v[: cutoffs[0]], axis=0)).mean(axis=0)  # no cycle: the one-step naive
        own_errors = []
        for j, (t, window) in enumerate(zip(cutoffs, series["windows"], strict=True)):
            f = np.array(window["forecast"], np.float32)
            np.testing.assert_array_equal(f, want[j])
            np.testing.assert_array_equal(np.array(window["actual"]), v[t : t + h])
            np.testing.assert_array_equal(np.array(window["lo-80"], np.float32), f - w80)
            np.testing.assert_array_equal(np.array(window["hi-80"], np.float32), f + w80)
            e = v[t : t + h] - f.astype(np.float64)
            own_errors.append(e)
            inside.append((v[t : t + h] >= f - w80) & (v[t : t + h] <= f + w80))
            scaled.append(np.abs(e) / naive)
        e = np.stack(own_errors)
        metrics = series["metrics"]
        assert metrics["points"] == k * h * C
        assert metrics["mae"] == pytest.approx(np.abs(e).mean(), rel=1e-12)
        assert metrics["mse"] == pytest.approx((e**2).mean(), rel=1e-12)
        assert metrics["mase"] == pytest.approx((np.abs(e) / naive).mean(), rel=1e-12)
        assert set(series["channel_metrics"]) == {"HUFL", "MUFL", "OT"}
        assert series["channel_metrics"]["OT"]["mae"] == pytest.approx(np.abs(e[..., 2]).mean(), rel=1e-12)
        errors.append(e)
    pooled = answer["metrics"]
    assert pooled["mae"] == pytest.approx(np.abs(np.stack(errors)).mean(), rel=1e-12)
    assert pooled["mase"] == pytest.approx(np.stack(scaled).mean(), rel=1e-12)
    assert pooled["coverage"]["80"] == pytest.approx(np.stack(inside).mean(), rel=1e-12)


def test_smape_and_missing_actuals(client: TestClient, repository: Path) -> None:
    """A null in what follows a cutoff is answered as null and left out of every mean."""
    v = history(14, 2)
    rows: list[list[float | None]] = v.tolist()
    rows[-1][0] = None
    r = client.post(f"{TOY}/cross_validation", json={"series": [{"values": rows}], "horizon": 2})
    assert r.status_code == 200, r.text
    window = r.json()["series"][0]["windows"][0]
    assert window["cutoff"] == 12 and window["actual"][-1][0] is None
    f = np.array(window["forecast"], np.float32).astype(np.float64)  # the float32 the model computed
    y = v[12:14]
    known = np.ones_like(y, dtype=bool)
    known[-1, 0] = False
    terms = 200 * np.abs(y - f) / (np.abs(y) + np.abs(f))
    metrics = r.json()["metrics"]
    assert metrics["points"] == 2 * C - 1
    assert metrics["smape"] == pytest.approx(terms[known].mean(), rel=1e-12)
    assert metrics["mae"] == pytest.approx(np.abs(y - f)[known].mean(), rel=1e-12)


def test_the_shipped_models_backtest_equals_the_offline_evaluator_on_the_etth1_test_split(
    client: TestClient,
) -> None:
    """The same windows (the first 16 of the test split, stride 1) through the service and through the
    offline evaluator, which runs the ONNX graph as calibration does: every metric within 1e-6
    (`python -m bench.backtest` checks the whole split)."""
    from export.backtest import evaluate_version, split_rows

    version = shipped_latest()
    start, rows = split_rows(version)
    n, h = MAX_WINDOWS, 24
    levels = [80.0, 95.0]
    offline = evaluate_version(version, horizon=h, levels=levels, windows=n)
    L_shipped = json.loads((version / "manifest.json").read_text())["input_length"]
    body = {
        "series": [{"id": "etth1", "start": start, "values": rows[: L_shipped + n - 1 + h].tolist()}],
        "horizon": h,
        "n_windows": n,
        "step_size": 1,
        "level": levels,
    }
    r = client.post("/v1/models/etth1-rsa/cross_validation", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["series"][0]["windows"][0]["cutoff"] == L_shipped
    pairs = [(answer["metrics"], offline["metrics"])]
    pairs += [(answer["series"][0]["channel_metrics"][c], m) for c, m in offline["channel_metrics"].items()]
    deltas = []
    for served, reference in pairs:
        assert served["points"] == reference["points"] > 0
        deltas += [abs(served[k] - reference[k]) for k in ("mae", "mse", "mase", "smape")]
        deltas += [abs(served["coverage"][f"{lv:g}"] - reference["coverage"][f"{lv:g}"]) for lv in levels]
    assert max(deltas) <= 1e-6


def test_the_shipped_model_flags_a_spike_and_repairs_the_points_after_it(client: TestClient) -> None:
    """Intervals that scale with each window's spread (the shipped default) through the repair pass."""
    from export.backtest import split_rows

    start, rows = split_rows(shipped_latest())
    values = rows[:528].copy()
    values[520, 6] += 30.0  # OT: far outside its 99% interval
    body = {"series": [{"start": start, "values": values.tolist()}], "level": 99, "last": 12}
    first = client.post("/v1/models/etth1-rsa/detect_anomalies", json={**body, "repair": False})
    repaired = client.post("/v1/models/etth1-rsa/detect_anomalies", json=body)
    assert first.status_code == repaired.status_code == 200, repaired.text
    a, b = first.json()["series"][0], repaired.json()["series"][0]
    at = a["index"].index(520)
    assert a["anomaly"][at][6] and b["anomaly"][at][6] and b["score"][at][6] > 5
    assert a["forecast"][: at + 1] == b["forecast"][: at + 1]  # up to the spike: nothing to repair
    assert a["forecast"][at + 1 :] != b["forecast"][at + 1 :]  # after it: read with the spike replaced
    # the echo of the spike in the next forecast is gone: no flag there once repaired
    assert a["anomaly"][at + 1][6] and not b["anomaly"][at + 1][6]


BAD_BACKTESTS = [
    # (body changes, field, limit)
    ({"series": [{"values": history(L + 2, 0).tolist()}], "horizon": 3}, "series[0].values", L + 3),
    (
        {"series": [{"values": history(20, 0).tolist()}], "horizon": 3, "n_windows": 11, "step_size": 1},
        "n_windows",
        10,
    ),
    ({"series": [{"values": history(20, 0).tolist()}], "horizon": 3, "level": [85]}, "level[0]", LEVELS),
    ({"series": [{"values": history(20, 0).tolist()}], "horizon": 5}, "horizon", H),
    (
        {
            "series": [{"values": history(30, i).tolist()} for i in range(2)],
            "horizon": 3,
            "n_windows": 9,
            "step_size": 1,
        },
        "n_windows",
        MAX_WINDOWS,
    ),
]


@pytest.mark.parametrize(("body", "field", "limit"), BAD_BACKTESTS)
def test_a_backtest_out_of_bounds_is_refused_naming_the_field_and_the_limit(
    client: TestClient, body: dict, field: str, limit: Any
) -> None:
    r = client.post(f"{TOY}/cross_validation", json=body)
    assert r.status_code == 422, r.text
    assert error_of(r) == (field, limit)


def test_a_backtest_of_too_many_series_or_unknown_fields_is_refused(client: TestClient) -> None:
    many = {"series": [{"values": history(20, 0).tolist()}] * (MAX_WINDOWS + 1), "horizon": 3}
    r = client.post(f"{TOY}/cross_validation", json=many)
    assert r.status_code == 422 and "at most 16" in r.text
    r = client.post(f"{TOY}/cross_validation", json={"series": [{"values": [[1, 2, 3]]}], "h": 3})
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "h"


@pytest.mark.parametrize("route", ["cross_validation", "detect_anomalies"])
@pytest.mark.parametrize(
    ("kind", "value"),
    [("future", {"promo": [0.0] * 20}), ("past", {"x": [1.0] * 20}), ("static", {"size": 1})],
)
def test_covariates_sent_to_a_model_without_them_are_refused(
    client: TestClient, route: str, kind: str, value: dict
) -> None:
    """Ignoring them would backtest without what the client believes the forecasts read."""
    body = {"series": [{"values": history(20, 0).tolist(), kind: value}], "horizon": 3}
    r = client.post(
        f"{TOY}/{route}", json=body if route == "cross_validation" else {"series": body["series"]}
    )
    assert r.status_code == 422, r.text
    assert error_of(r)[0] == f"series[0].{kind}" and "takes no covariates" in r.json()["error"]["message"]


def test_levels_of_a_version_without_intervals_are_refused(client: TestClient) -> None:
    body = {"series": [{"values": history(20, 0).tolist()}], "horizon": 3, "level": [80]}
    r = client.post(f"{TOY}/versions/1/cross_validation", json=body)
    assert r.status_code == 422 and r.json()["error"]["code"] == "no_calibrated_intervals"
    body.pop("level")
    assert client.post(f"{TOY}/versions/1/cross_validation", json=body).status_code == 200


# -- detect_anomalies -----------------------------------------------------------------------------------


def test_each_point_is_checked_against_the_interval_of_its_one_step_forecast(
    client: TestClient, repository: Path
) -> None:
    v = history(24, 3)
    v[20, 1] += 40.0  # a spike far outside any width of the toy's intervals
    body = {"series": [{"id": "a", "values": v.tolist()}], "level": 95, "repair": False}
    r = client.post(f"{TOY}/detect_anomalies", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["level"], answer["lead"]) == (95, 1)
    series = answer["series"][0]
    points = list(range(L, 24))
    assert series["index"] == points
    f = toy_forecast(repository, np.stack([v[t - L : t] for t in points]))[:, 0]
    w = widths()[LEVELS.index(95.0), 0]
    np.testing.assert_array_equal(np.array(series["forecast"], np.float32), f)
    np.testing.assert_array_equal(np.array(series["lo"], np.float32), f - w)
    np.testing.assert_array_equal(np.array(series["hi"], np.float32), f + w)
    y = v[points]
    flags = (y < f - w) | (y > f + w)
    assert np.array(series["anomaly"]).tolist() == flags.tolist()
    assert series["anomaly"][20 - L][1] is True
    np.testing.assert_allclose(np.array(series["score"]), np.abs(y - f) / w.astype(np.float64), rtol=1e-12)
    assert series["anomalies"] == answer["anomalies"] == int(flags.sum())


def own_history(repository: Path, n: int) -> np.ndarray:
    """A history the toy forecasts well: each value its one-step forecast from the values before, plus
    noise well inside the 50% interval."""
    rng = np.random.default_rng(8)
    v = np.zeros((n, C))
    v[:L] = rng.normal(0, 1, (L, C))
    w = widths()[0, 0]
    for t in range(L, n):
        v[t] = toy_forecast(repository, v[None, t - L : t])[0, 0] + rng.uniform(-0.5, 0.5, C) * w
    return v


def sequential_repair(
    repository: Path, v: np.ndarray, first: int, lead: int, level: float
) -> tuple[np.ndarray, bool]:
    """docs/backtest.md's repair, one point at a time in time order (the service runs it in rounds of
    one batch): each point forecast from the values as repaired so far, `lead` steps ahead, or further
    from the window before the replaced values its window would end with; a flag taken for a spike
    (replaced by its forecast), unless the point `lead` steps after it is flagged on the same side by at
    least half as much: a level shift's onset, then read as sent, with the flags on its side after it.
    Returns the forecasts [points, C] and whether a shift was found."""
    w = widths()[LEVELS.index(level)]
    values = v.copy()
    replaced = np.zeros(len(v), bool)
    spikes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    shifting = np.zeros(C)
    out, shifted = [], False
    t = first
    while t < len(v):
        step = lead
        while step < min(H, t + 1 - L) and replaced[t - step]:
            step += 1
        f = toy_forecast(repository, values[None, t - step + 1 - L : t - step + 1])[0, step - 1]
        diff = v[t] - f.astype(np.float64)
        flags = np.abs(diff) > w[step - 1]
        onset = t - lead
        if onset in spikes:
            channels, before = spikes[onset]
            shift = (
                channels & flags & (np.sign(diff) == np.sign(before)) & (np.abs(diff) >= np.abs(before) / 2)
            )
            if shift.any():
                shifted = True
                for r in range(onset, t):
                    if r in spikes:
                        undo = spikes[r][0] & shift
                        values[r, undo] = v[r, undo]
                        spikes[r][0][undo] = False
                        if not spikes[r][0].any():
                            del spikes[r]
                            replaced[r] = False
                shifting[shift] = np.sign(before[shift])
                continue  # judged again from the values as sent
        absorbing = flags & (shifting != 0) & (np.sign(diff) == shifting)
        shifting[~absorbing] = 0
        spike = flags & ~absorbing
        if spike.any():
            values[t, spike] = f[spike]
            replaced[t] = True
            spikes[t] = (spike, diff)
        out.append(f)
        t += 1
    return np.array(out), shifted


@pytest.mark.parametrize(
    ("lead", "event"), [(1, "spike"), (2, "spike"), (1, "shift"), (2, "shift"), (1, "two spikes")]
)
def test_the_repair_equals_judging_each_point_in_time_order_from_the_values_repaired_before_it(
    client: TestClient, repository: Path, lead: int, event: str
) -> None:
    """The service's rounds give the forecasts of the sequential rule, whatever flags the toy's random
    forecasts raise besides the events (a shift's onset is told from a spike only where it is one)."""
    v = own_history(repository, 24 + lead - 1)  # 16 points checked: the limit here
    if event == "shift":
        v[13:, 0] += 60.0
    else:
        v[12, 0] += 60.0
        if event == "two spikes":
            v[15, 1] -= 60.0
    body = {"series": [{"values": v.tolist()}], "level": 99, "lead": lead}
    plain = client.post(f"{TOY}/detect_anomalies", json={**body, "repair": False}).json()["series"][0]
    repaired = client.post(f"{TOY}/detect_anomalies", json=body).json()["series"][0]
    first = repaired["index"][0]
    want, shifted = sequential_repair(repository, v, first, lead, 99.0)
    np.testing.assert_array_equal(np.array(repaired["forecast"], np.float32), want)
    assert repaired["actual"] == plain["actual"]  # the values checked are the ones sent
    assert shifted == (event == "shift")
    flagged = np.array(repaired["anomaly"])
    assert flagged[(13 if event == "shift" else 12) - first, 0]  # the spike, the shift's onset
    if event != "shift" and lead == 1:  # nothing else: the points after a spike read windows without it
        assert flagged.sum() == 1 + (event == "two spikes")


def test_a_long_check_is_repaired_to_its_last_point(repository: Path) -> None:
    """Spikes every 12 points and a shift over 232 checked points, each spike in the windows of the 8
    points after it: the rounds judge every point as the sequential rule does, and the points after the
    spikes are flagged no more than elsewhere. The rounds once forecast a point only when every point
    before it was judged, one point a round after the first spike, and stopped after 32: every later
    spike's echo stayed (the point after it flagged as often as without the repair)."""
    v = own_history(repository, 240)
    spikes = range(20, 200, 12)
    for t in spikes:
        v[t, t % C] += 60.0 if t % 24 else -60.0
    v[205:, 1] += 60.0
    body = {"series": [{"values": v.tolist()}], "level": 99}
    with running_client(make_settings(repository, max_series_per_request=256)) as long_client:
        answers = {
            repair: long_client.post(f"{TOY}/detect_anomalies", json={**body, "repair": repair}).json()
            for repair in (True, False)
        }
    repaired = answers[True]["series"][0]
    first = repaired["index"][0]
    want, shifted = sequential_repair(repository, v, first, 1, 99.0)
    np.testing.assert_array_equal(np.array(repaired["forecast"], np.float32), want)
    assert shifted
    # the values the repair read as their forecast: each spike's, never the shift's
    replaced = np.array(repaired["replaced"])
    assert all(replaced[t - first, t % C] for t in spikes) and not replaced[205 - first :, 1].any()
    assert not (replaced & ~np.array(repaired["anomaly"])).any()  # only flagged values
    assert "replaced" not in answers[False]["series"][0]
    after = {}
    for repair, answer in answers.items():
        flagged = np.array(answer["series"][0]["anomaly"])
        assert all(flagged[t - first, t % C] for t in spikes)
        after[repair] = sum(bool(flagged[t + 1 - first, t % C]) for t in spikes)
    assert after[True] <= 2 < after[False], after


def test_the_online_form_checks_only_the_last_points_with_the_same_answers(client: TestClient) -> None:
    v = history(24, 4)
    body: dict[str, Any] = {
        "series": [{"values": v.tolist(), "start": "2024-01-01T00:00:00Z"}],
        "level": 80,
        "repair": False,  # the online form repairs only what it checks
    }
    full = client.post(f"{TOY}/detect_anomalies", json=body).json()["series"][0]
    online = client.post(f"{TOY}/detect_anomalies", json={**body, "last": 3}).json()["series"][0]
    assert online["index"] == [21, 22, 23]
    assert online["timestamps"] == ["2024-01-01T21:00:00Z", "2024-01-01T22:00:00Z", "2024-01-01T23:00:00Z"]
    for key in ("actual", "forecast", "lo", "hi", "anomaly", "score", "timestamps"):
        assert online[key] == full[key][-3:], key


def test_lead_forecasts_each_point_from_further_back(client: TestClient, repository: Path) -> None:
    v = history(16, 5)
    r = client.post(
        f"{TOY}/detect_anomalies", json={"series": [{"values": v.tolist()}], "lead": 3, "last": 2}
    )
    assert r.status_code == 200, r.text
    series = r.json()["series"][0]
    assert series["index"] == [14, 15]
    want = toy_forecast(repository, np.stack([v[t - 2 - L : t - 2] for t in (14, 15)]))[:, 2]
    np.testing.assert_array_equal(np.array(series["forecast"], np.float32), want)
    w = widths()[LEVELS.index(99.0), 2]  # the default level, at the third step's width
    np.testing.assert_array_equal(np.array(series["hi"], np.float32), want + w)


BAD_ANOMALY_CHECKS = [
    ({"series": [{"values": history(20, 0).tolist()}], "level": 85}, "level", LEVELS),
    ({"series": [{"values": history(20, 0).tolist()}], "last": 13}, "last", 12),
    ({"series": [{"values": history(20, 0).tolist()}], "lead": 5}, "lead", H),
    ({"series": [{"values": history(30, 0).tolist()}]}, "last", MAX_WINDOWS),
    ({"series": [{"values": history(L, 0).tolist()}]}, "series[0].values", L + 1),
    ({"series": [{"values": history(L + 1, 0).tolist()}], "lead": 2}, "series[0].values", L + 2),
]


@pytest.mark.parametrize(("body", "field", "limit"), BAD_ANOMALY_CHECKS)
def test_an_anomaly_check_out_of_bounds_is_refused_naming_the_field_and_the_limit(
    client: TestClient, body: dict, field: str, limit: Any
) -> None:
    r = client.post(f"{TOY}/detect_anomalies", json=body)
    assert r.status_code == 422, r.text
    assert error_of(r) == (field, limit)


def test_an_anomaly_check_needs_calibrated_intervals(client: TestClient) -> None:
    r = client.post(
        f"{TOY}/versions/1/detect_anomalies", json={"series": [{"values": history(12, 0).tolist()}]}
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "no_calibrated_intervals" and r.json()["error"]["field"] == "level"


def test_openapi_documents_both_routes_with_examples(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    for route, body in (
        ("cross_validation", "CrossValidationRequest"),
        ("detect_anomalies", "AnomalyRequest"),
    ):
        assert f"/v1/models/{{name}}/{route}" in doc["paths"]
        assert f"/v1/models/{{name}}/versions/{{version}}/{route}" in doc["paths"]
        schema = doc["components"]["schemas"][body]
        assert schema["examples"] and "series" in schema["properties"]


def test_a_global_model_backtests_and_checks_flat_series_from_min_history(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A global read-out (one channel, flat lists, histories from min_history on, the missing start
    masked): each cutoff's forecast is the model's own forecast of the values before it."""
    from tests.utils.panel import NAME, publish, unseen

    repo, model = publish(tmp_path_factory.mktemp("panel_evaluation"))
    start, values = unseen()["store_new"]
    h, k = 3, 4
    with running_client(make_settings(repo)) as client:
        r = client.post(
            f"/v1/models/{NAME}/cross_validation",
            json={
                "series": [{"id": "s", "start": start, "values": values.tolist()}],
                "horizon": h,
                "n_windows": k,
            },
        )
        assert r.status_code == 200, r.text
        windows = r.json()["series"][0]["windows"]
        cutoffs = [len(values) - h - h * (k - 1 - j) for j in range(k)]
        assert [w["cutoff"] for w in windows] == cutoffs
        want = model.forecast([values[:t] for t in cutoffs])[:, :h]
        got = np.array([np.array(w["forecast"])[:, 0] for w in windows])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        short = values[: model.min_history + 2]  # shorter than L: windows masked at the start
        r = client.post(f"/v1/models/{NAME}/detect_anomalies", json={"series": [{"values": short.tolist()}]})
        assert r.status_code == 200, r.text
        # the highest this small panel's intervals offer: 99%, extrapolated from 95% (87 windows: not 99)
        assert r.json()["level"] == 99
        assert r.json()["series"][0]["index"] == [model.min_history, model.min_history + 1]


def test_backtests_and_anomaly_checks_lay_out_and_score_their_windows_off_the_event_loop(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-window numpy and Python work of a backtest (its plan and its scored answer) and of an
    anomaly check (its timestamps and covariates, windows and answer) runs in worker threads: on the
    event loop a 1,024-window backtest stalled every other request for 0.1-0.6 s (issue 46)."""
    from app.protocols.rsa_v1 import evaluation

    on_loop: dict[str, list[bool]] = {}

    def spy(name: str) -> None:
        real = getattr(evaluation, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
                on_loop.setdefault(name, []).append(True)
            except RuntimeError:  # no loop in this thread: a worker
                on_loop.setdefault(name, []).append(False)
            return real(*args, **kwargs)

        monkeypatch.setattr(evaluation, name, wrapped)

    for name in ("_backtest_plan", "_backtest_answer", "window_batch", "anomaly_series", "_covariates"):
        spy(name)
    body = {"series": [{"id": "a", "values": history(20, 0).tolist()}], "horizon": 2, "n_windows": 2}
    assert client.post(f"{TOY}/cross_validation", json=body).status_code == 200
    body = {"series": [{"id": "a", "values": history(24, 3).tolist()}], "level": 95}
    assert client.post(f"{TOY}/detect_anomalies", json=body).status_code == 200
    assert set(on_loop) == {
        "_backtest_plan",
        "_backtest_answer",
        "window_batch",
        "anomaly_series",
        "_covariates",
    }
    assert not any(any(calls) for calls in on_loop.values()), on_loop
