"""A global model served: from a written long CSV (tests/utils/panel.py: train, export through the CLI)
to forecasts of series never seen in training, on each protocol (/v1, OIP v2 REST JSON and binary, OIP
v2 gRPC, KServe's time-series route), checked against GlobalModel.forecast (values) and each series' own
calendar (timestamps). One service process for the module (gRPC needs a listening server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pandas as pd
import pytest
from tritonclient.grpc import service_pb2 as pb  # not ours: the two cannot share a process (oip_v2/README.md)
from tritonclient.grpc import service_pb2_grpc as pb_grpc

from bench.loadgen import free_port
from export.global_models.model import GlobalModel
from tests.app.conftest import make_settings, running_client
from tests.app.live import live_service
from tests.utils.panel import HORIZON, NAME, publish, unseen


@dataclass(frozen=True)
class Panel:
    url: str
    grpc_port: int
    model: GlobalModel
    repo: Path

    def post(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, timeout=30, **kwargs)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Panel]:
    folder = tmp_path_factory.mktemp("panel")
    repo, model = publish(folder)
    port = free_port()
    with live_service(repo, folder / "service.log", RSA_GRPC_PORT=str(port)) as service:
        yield Panel(service.url, port, model, repo)


def right_aligned(model: GlobalModel) -> tuple[np.ndarray, np.ndarray]:
    """The unseen series as OIP v2 windows [n, L] (each right-aligned, zeros before a short one's start,
    which the lengths mark as missing) and their lengths [n]."""
    L = model.input_length
    histories = [v[-L:] for _, v in unseen().values()]
    window = np.zeros((len(histories), L), np.float32)
    for i, h in enumerate(histories):
        window[i, L - len(h) :] = h
    return window, np.array([len(h) for h in histories], np.int64)


def months_after(start: str, n: int, horizon: int) -> list[pd.Timestamp]:
    """The `horizon` month starts after a series of n monthly values from `start`."""
    return list(pd.date_range(start, periods=n + horizon, freq="MS", tz="UTC")[n:])


def expected(model: GlobalModel, horizon: int = HORIZON) -> dict[str, np.ndarray]:
    series = unseen()
    want = model.forecast([v for _, v in series.values()])[:, :horizon]
    return dict(zip(series, want, strict=True))


def test_v1_forecasts_unseen_series_of_any_length_with_their_own_timestamps(
    served: Panel,
) -> None:
    model = served.model
    series = unseen()
    body = {
        "series": [{"id": k, "start": s, "values": v.tolist()} for k, (s, v) in series.items()],
        "horizon": 4,
    }
    r = served.post(f"/v1/models/{NAME}/forecast", body)
    assert r.status_code == 200, r.text
    want = expected(model, 4)
    answer = r.json()["forecasts"]
    assert [f["id"] for f in answer] == list(series)
    for f in answer:
        start, values = series[f["id"]]
        assert f["channels"] == ["y"]
        np.testing.assert_allclose(np.array(f["forecast"])[:, 0], want[f["id"]], rtol=1e-4, atol=1e-3)
        assert [pd.Timestamp(t) for t in f["timestamps"]] == months_after(start, len(values), 4)


def test_v1_refuses_a_history_shorter_than_min_history_naming_the_series(
    served: Panel,
) -> None:
    model = served.model
    ok = unseen()["store_new"][1].tolist()
    body = {"series": [{"id": "a", "values": ok}, {"id": "b", "values": ok[: model.min_history - 1]}]}
    r = served.post(f"/v1/models/{NAME}/forecast", body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert (error["field"], error["limit"]) == ("series[1].values", model.min_history)
    assert "(series 'b')" in error["message"] and "min_history" in error["message"]


def test_v1_describes_the_global_model(served: Panel) -> None:
    model = served.model
    version = httpx.get(f"{served.url}/v1/models/{NAME}", timeout=30).json()["versions"][0]
    assert version["kind"] == "global_readout"
    assert version["panel"] == {"min_history": model.min_history, "period": 12, "covariates": []}


def test_a_one_channel_wide_model_takes_a_flat_list_as_it_takes_rows(tmp_path: Path) -> None:
    from tests.app.fakes import ToySpec, write_version

    write_version(tmp_path, ToySpec(name="one", channels=("OT",)))
    values = [float(v) for v in np.linspace(1.0, 3.0, 10)]
    with running_client(make_settings(tmp_path)) as client:
        flat = client.post("/v1/models/one/forecast", json={"series": [{"values": values}]})
        rows = client.post("/v1/models/one/forecast", json={"series": [{"values": [[v] for v in values]}]})
        short = client.post("/v1/models/one/forecast", json={"series": [{"values": values[:5]}]})
    assert flat.status_code == rows.status_code == 200, flat.text
    assert flat.json()["forecasts"] == rows.json()["forecasts"]
    assert short.status_code == 422 and "its input length" in short.text  # a wide model: L values


def test_oip_v2_json_takes_windows_and_lengths(served: Panel) -> None:
    window, lengths = right_aligned(served.model)
    body = {
        "inputs": [
            {
                "name": "window",
                "datatype": "FP32",
                "shape": list(window.shape),
                "data": window.ravel().tolist(),
            },
            {"name": "lengths", "datatype": "INT64", "shape": [len(lengths)], "data": lengths.tolist()},
        ]
    }
    r = served.post(f"/v2/models/{NAME}/infer", body)
    assert r.status_code == 200, r.text
    outputs = {o["name"]: o for o in r.json()["outputs"]}  # none named: every one, intervals included
    out = outputs["forecast"]
    assert out["shape"] == [2, HORIZON, 1]
    got = np.array(out["data"]).reshape(2, HORIZON)
    np.testing.assert_allclose(got, np.stack(list(expected(served.model).values())), rtol=1e-4, atol=1e-3)
    upper = np.array(outputs["forecast_hi_80"]["data"]).reshape(2, HORIZON)
    assert (upper > got).all()  # each series' own spread, its masked start left out
    meta = httpx.get(f"{served.url}/v2/models/{NAME}", timeout=30).json()
    assert [(t["name"], t["shape"]) for t in meta["inputs"]] == [
        ("window", [-1, served.model.input_length, 1]),
        ("lengths", [-1]),
    ]


def test_oip_v2_a_window_of_the_wrong_shape_is_refused_with_the_shape_sent(served: Panel) -> None:
    """A global model takes [n, L, 1] or [n, L]; a refusal echoes the shape as sent and names both."""
    L = served.model.input_length
    body = {
        "inputs": [{"name": "window", "datatype": "FP32", "shape": [3, L - 1], "data": [1.0] * (3 * (L - 1))}]
    }
    r = served.post(f"/v2/models/{NAME}/infer", body)
    assert r.status_code == 400
    assert r.json()["error"].startswith(
        f"input 'window' has shape [3, {L - 1}]; model {NAME} takes [n, {L}, 1]"
    )
    assert r.json()["error"].endswith(f", or [n, {L}] (one channel)")


def test_oip_v2_binary_and_a_length_below_min_history(served: Panel) -> None:
    window, lengths = right_aligned(served.model)
    header = {
        "inputs": [
            {
                "name": "window",
                "datatype": "FP32",
                "shape": list(window.shape),
                "parameters": {"binary_data_size": window.nbytes},
            },
            {"name": "lengths", "datatype": "INT64", "shape": [2], "parameters": {"binary_data_size": 16}},
        ],
        "outputs": [{"name": "forecast", "parameters": {"binary_data": True}}],
    }

    def infer(lengths: np.ndarray) -> httpx.Response:
        head = json.dumps(header).encode()
        return httpx.post(
            f"{served.url}/v2/models/{NAME}/infer",
            content=head + window.tobytes() + lengths.tobytes(),
            headers={"Inference-Header-Content-Length": str(len(head)), "Content-Type": "application/json"},
            timeout=30,
        )

    r = infer(lengths)
    assert r.status_code == 200, r.text
    cut = int(r.headers["Inference-Header-Content-Length"])
    got = np.frombuffer(r.content[cut:], np.float32).reshape(2, HORIZON)
    np.testing.assert_allclose(got, np.stack(list(expected(served.model).values())), rtol=1e-4, atol=1e-3)
    short = infer(np.array([lengths[0], served.model.min_history - 1], np.int64))
    assert short.status_code == 400 and "lengths[1]" in short.text and "min_history" in short.text


def test_oip_v2_grpc(served: Panel) -> None:
    window, lengths = right_aligned(served.model)
    request = pb.ModelInferRequest(model_name=NAME)
    request.inputs.add(name="window", datatype="FP32", shape=list(window.shape))
    request.inputs.add(name="lengths", datatype="INT64", shape=[len(lengths)])
    request.raw_input_contents.extend([window.tobytes(), lengths.tobytes()])
    with grpc.insecure_channel(f"127.0.0.1:{served.grpc_port}") as channel:
        answer = pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=30)
    got = np.frombuffer(answer.raw_output_contents[0], np.float32).reshape(2, HORIZON)
    np.testing.assert_allclose(got, np.stack(list(expected(served.model).values())), rtol=1e-4, atol=1e-3)


def test_nulls_before_a_series_began_are_not_its_values_on_every_route(served: Panel) -> None:
    """A later series sent from the panel's first step (a wide file's empty cells: nulls, or NaN rows in
    a tensor, before its first value) is the series from its first value: /v1's forecast, backtest (its
    refits too) and anomaly check, and OIP v2's windows without `lengths`, answer what they answer
    without the nulls (30 nulls before 15 values were refused as missing values before)."""
    model, nulls = served.model, 30
    short, long = unseen()["store_opened"][1].tolist(), unseen()["store_new"][1].tolist()
    routes = (
        ("forecast", short, {}, "forecasts", "forecast"),
        ("cross_validation", long, {"horizon": 3, "n_windows": 2, "refit": True}, "series", "windows"),
        ("detect_anomalies", long, {"level": 80}, "series", "forecast"),
    )
    answers = {}
    for route, values, extra, key, part in routes:
        sent = {"series": [{"values": values}], **extra}
        plain = served.post(f"/v1/models/{NAME}/{route}", sent)
        later = served.post(
            f"/v1/models/{NAME}/{route}", {**sent, "series": [{"values": [None] * nulls + values}]}
        )
        assert plain.status_code == later.status_code == 200, (route, plain.text, later.text)
        a, b = plain.json()[key][0], later.json()[key][0]
        if route == "cross_validation":
            assert [w["cutoff"] + nulls for w in a[part]] == [w["cutoff"] for w in b[part]]
            a[part] = [w["forecast"] for w in a[part]]
            b[part] = [w["forecast"] for w in b[part]]
        assert a[part] == b[part], route
        answers[route] = (a, b)
    a, b = answers["detect_anomalies"]
    assert [i + nulls for i in a["index"]] == b["index"] and a["index"][0] == model.min_history
    too_few = served.post(f"/v1/models/{NAME}/forecast", {"series": [{"values": [None] * nulls + short[:2]}]})
    error = too_few.json()["error"]
    assert too_few.status_code == 422 and error["field"] == "series[0].values"
    assert f"has 2 points after its first {nulls} nulls (before the series began)" in error["message"]
    one = served.post(f"/v1/models/{NAME}/forecast", {"series": [{"values": short[:1]}]}).json()["error"]
    assert "series[0].values has 1 point; the model needs at least" in one["message"], one
    # OIP v2: the short series right-aligned, NaN before its start, no `lengths`
    L = model.input_length
    window = np.full((1, L), np.nan, np.float32)
    window[0, L - len(short) :] = short
    header = {
        "inputs": [
            {
                "name": "window",
                "datatype": "FP32",
                "shape": [1, L],
                "parameters": {"binary_data_size": window.nbytes},
            }
        ],
        "outputs": [{"name": "forecast", "parameters": {"binary_data": True}}],
    }
    head = json.dumps(header).encode()
    r = httpx.post(
        f"{served.url}/v2/models/{NAME}/infer",
        content=head + window.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(head)), "Content-Type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    got = np.frombuffer(r.content[int(r.headers["Inference-Header-Content-Length"]) :], np.float32)
    a, _ = answers["forecast"]
    np.testing.assert_allclose(got, np.array(a["forecast"])[:, 0], rtol=1e-6)
    # with `lengths`, as the client sends a frame's rows: zeros before them, then the NaN rows
    padded = np.zeros((1, L), np.float32)
    padded[0, L - len(short) - 5 : L - len(short)] = np.nan
    padded[0, L - len(short) :] = short
    header_lengths = {
        **header,
        "inputs": [
            *header["inputs"],
            {"name": "lengths", "datatype": "INT64", "shape": [1], "parameters": {"binary_data_size": 8}},
        ],
    }
    head_lengths = json.dumps(header_lengths).encode()
    r = httpx.post(
        f"{served.url}/v2/models/{NAME}/infer",
        content=head_lengths + padded.tobytes() + np.array([len(short) + 5], np.int64).tobytes(),
        headers={
            "Inference-Header-Content-Length": str(len(head_lengths)),
            "Content-Type": "application/json",
        },
        timeout=30,
    )
    assert r.status_code == 200, r.text
    got = np.frombuffer(r.content[int(r.headers["Inference-Header-Content-Length"]) :], np.float32)
    np.testing.assert_allclose(got, np.array(a["forecast"])[:, 0], rtol=1e-6)
    window[0, : L - model.min_history + 1] = np.nan  # fewer than min_history values after the NaN rows
    r = httpx.post(
        f"{served.url}/v2/models/{NAME}/infer",
        content=head + window.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(head)), "Content-Type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 400 and "window[0]" in r.text and "min_history" in r.text, r.text


def test_kserve_timeseries_univariate_series_of_any_length(served: Panel) -> None:
    series = unseen()
    body = {
        "model": NAME,
        "inputs": [
            {
                "type": "univariate_time_series",
                "name": k,
                "series": v.tolist(),
                "frequency": "M",
                "start_timestamp": s,
            }
            for k, (s, v) in series.items()
        ],
        "options": {"horizon": 3},
    }
    r = served.post("/v1/timeseries/forecast", body)
    assert r.status_code == 200, r.text
    want = expected(served.model, 3)
    for output in r.json()["outputs"]:
        (content,) = output["content"]
        start, values = series[content["name"]]
        np.testing.assert_allclose(content["mean_forecast"], want[content["name"]], rtol=1e-4, atol=1e-3)
        assert pd.Timestamp(content["start_timestamp"]) == months_after(start, len(values), 1)[0]


def test_v1_intervals_scale_with_each_series_own_seasonal_naive_error(served: Panel) -> None:
    """Pooled widths (in units of a series' spread) times each series' mean |x_t − x_{t−12}| over its
    window's observed values: a short series (its start masked) gets finite bounds of its own, from the
    widths calibrated on windows cut to as few values (`intervals.history`)."""
    L = served.model.input_length
    intervals = json.loads((served.repo / NAME / "1" / "manifest.json").read_text())["intervals"]
    k = intervals["levels"].index(80.0)
    main = np.array(intervals["widths"])[k, :, 0]  # [H]
    edges = intervals["history"]["values"]
    blocks = np.array(intervals["history"]["widths"])[:, k, :, 0]  # [blocks, H]
    assert edges[0] == served.model.min_history and edges[-1] == L, edges
    series = unseen()
    body = {"series": [{"id": i, "values": v.tolist()} for i, (_, v) in series.items()], "level": [80]}
    r = served.post(f"/v1/models/{NAME}/forecast", body)
    assert r.status_code == 200, r.text
    short = 0
    for f, (_, v) in zip(r.json()["forecasts"], series.values(), strict=True):
        tail = v[-L:]
        spread = np.abs(tail[12:] - tail[:-12]).mean()  # every series here has a pair a period apart
        block = int(np.searchsorted(edges, len(tail), side="right")) - 1
        widths = blocks[block] if block < len(blocks) else main
        short += block < len(blocks)
        point = np.array(f["forecast"])[:, 0]
        np.testing.assert_allclose(np.array(f["hi-80"])[:, 0] - point, widths * spread, rtol=1e-4)
        np.testing.assert_allclose(point - np.array(f["lo-80"])[:, 0], widths * spread, rtol=1e-4)
    assert short == 1  # store_opened's 15 values: the block of 13 to 17


def test_the_openapi_document_shows_a_global_model_request(served: Panel) -> None:
    doc = httpx.get(f"{served.url}/openapi.json", timeout=30).json()
    examples = doc["components"]["schemas"]["ForecastRequest"]["examples"]
    flat = [s for e in examples for s in e["series"] if not isinstance(s["values"][0], list)]
    assert flat and all("id" in s and "start" in s for s in flat)


def test_kserve_refuses_a_series_shorter_than_min_history_naming_it(served: Panel) -> None:
    short = unseen()["store_opened"][1][: served.model.min_history - 1].tolist()
    item = {"type": "univariate_time_series", "name": "tiny", "series": short, "frequency": "M"}
    body = {"model": NAME, "inputs": [{**item, "start_timestamp": "2023-01-01"}], "options": {"horizon": 3}}
    r = served.post("/v1/timeseries/forecast", body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "inputs[0].series" and "(series 'tiny')" in error["message"]
