"""The shipped models, served from the repository as a fresh clone has it: no training, no torch.

etth1-rsa version 5 (the default: the latest) is the REM read-out (docs/rsa.md §8): 87 fixed REM heads read
at the last step of an L = 512 window, gates 1, with prediction intervals that scale with each window's
spread. Version 4 is the same kind with 36 heads at gates 0.95 and unscaled intervals; version 3 is
version 2's graphs with intervals (export.conformal); versions 2-5 have a seasonal cycle and take a phase.
Version 1 is the earlier model without one, kept so every kind of artifact is served from real exports.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.artifacts.manifest import load_manifest
from tests.app.attention_json import assert_encoded_as_before
from tests.app.conftest import make_settings, ort_forecast, ort_run, running_client

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = ROOT / "model_repository"
V1 = REPOSITORY / "etth1-rsa" / "1"
V2 = REPOSITORY / "etth1-rsa" / "2"
V3 = REPOSITORY / "etth1-rsa" / "3"
V4 = REPOSITORY / "etth1-rsa" / "4"
DEFAULT = REPOSITORY / "etth1-rsa" / "5"
L = 512  # the default's input length (version 4's too)


def etth1_rows(first: int, count: int) -> tuple[list[str], list[list[float]]]:
    with (ROOT / "data" / "ETT" / "ETTh1.csv").open() as f:
        rows = list(csv.reader(f))[1 + first : 1 + first + count]
    return [r[0] for r in rows], [[float(v) for v in r[1:]] for r in rows]


@pytest.fixture(scope="module")
def client():
    with running_client(make_settings(REPOSITORY, models=["etth1-rsa"])) as c:
        yield c


def hour_phase(stamp: str) -> int:
    """The phase of an hourly window with a daily cycle, worked out from the calendar: its UTC hour."""
    return int(stamp[11:13])


@pytest.mark.parametrize("folder", [V1, V2, V3, V4, DEFAULT], ids=["v1", "v2", "v3", "v4", "v5"])
def test_shipped_model_is_complete_and_small(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (
        manifest["input_length"] == (L if folder in (V4, DEFAULT) else 96)
        and manifest["dataset"]["name"] == "ETTh1"
    )
    # what each is, in its manifest: the REM read-outs (4, 5) and the RSA-Transformers (1-3)
    assert manifest["kind"] == ("rem_readout" if folder in (V4, DEFAULT) else "rsa_transformer")
    assert manifest["description"].startswith(
        "REM read-out" if folder in (V4, DEFAULT) else "RSA-Transformer: 1 encoder layer of 4 heads"
    )
    assert manifest["dataset"]["mode"] == "M" and len(manifest["channels"]) == 7
    assert manifest["metrics"]["test_mse"] > 0
    assert sum(p.stat().st_size for p in folder.iterdir()) < 8 * 2**20  # a few MB at most


def test_default_has_a_daily_cycle(client):
    manifest = json.loads((DEFAULT / "manifest.json").read_text())
    assert manifest["cycle"] == {"period": 24, "step_seconds": 3600}
    assert [i["name"] for i in manifest["inputs"]] == ["window", "phase"]
    versions = {v["version"]: v for v in client.get("/v1/models/etth1-rsa").json()["versions"]}
    assert (
        versions[2]["cycle"]
        == versions[3]["cycle"]
        == versions[4]["cycle"]
        == versions[5]["cycle"]
        == {"period": 24, "step_seconds": 3600}
    )
    assert versions[1]["cycle"] is None
    assert (
        versions[5]["kind"] == "rem_readout" and "87 fixed linear recurrences" in versions[5]["description"]
    )


def test_default_needs_start(client):
    _, values = etth1_rows(12000, L)
    r = client.post("/v1/models/etth1-rsa/forecast", json={"series": [{"values": values}]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "series[0].start"


def test_forecasts_equal_a_direct_onnxruntime_call(client):
    starts = [11520 - L, 12000, 14400 - L - 96]  # test-split windows
    series, windows = [], []
    for s in starts:
        stamps, values = etth1_rows(s, L)
        series.append({"id": str(s), "values": values, "start": stamps[0].replace(" ", "T")})
        windows.append(values)
    r = client.post("/v1/models/etth1-rsa/forecast", json={"series": series})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["version"] == 5
    phases = [hour_phase(x["start"]) for x in series]
    expected = ort_forecast(DEFAULT / "model.onnx", np.array(windows, np.float32), phases)
    wrong = ort_forecast(
        DEFAULT / "model.onnx", np.array(windows, np.float32), [(p + 1) % 24 for p in phases]
    )
    assert float(np.abs(wrong - expected).max()) > 1e-3  # the phase matters
    for i, fc in enumerate(body["forecasts"]):
        assert fc["id"] == str(starts[i])
        np.testing.assert_allclose(np.array(fc["forecast"]), expected[i], atol=1e-5, rtol=0)
    truth_stamps, _ = etth1_rows(starts[0] + L, 96)
    assert [t.replace("T", " ").removesuffix("Z") for t in body["forecasts"][0]["timestamps"]] == truth_stamps


@pytest.mark.parametrize("version", [3, 4, 5])
def test_versions_3_to_5_have_intervals_for_every_horizon(client, version):
    """Version 3 is version 2's graphs byte for byte; the bounds are the forecast ± the manifest's widths
    (times the window's own spread for version 5, whose intervals scale with it), a request's horizon
    taking the first steps' widths; version 2 has no intervals and says so."""
    folder = REPOSITORY / "etth1-rsa" / str(version)
    if version == 3:
        for name in ("model.onnx", "inspect.onnx"):
            assert (folder / name).read_bytes() == (V2 / name).read_bytes()
    intervals = load_manifest(folder / "manifest.json").intervals
    assert intervals is not None and intervals.array.shape == (5, 96, 7)
    assert (intervals.scale == "window") == (version == 5)
    stamps, values = etth1_rows(12000, L)  # version 3 reads the last 96 of them
    window = np.array(values, np.float32)[-(96 if version == 3 else L) :][None]
    scale = intervals.window_scale.scale(window)[0] if intervals.window_scale else np.float32(1.0)
    request = {"series": [{"values": values, "start": stamps[0].replace(" ", "T")}], "level": [80, 95]}
    for horizon in (3, 96):
        url = f"/v1/models/etth1-rsa/versions/{version}/forecast"
        r = client.post(url, json={**request, "horizon": horizon})
        assert r.status_code == 200, r.text
        answer = r.json()["forecasts"][0]
        f = np.array(answer["forecast"], np.float32)
        for level, k in ((80, 1), (95, 3)):
            width = intervals.array[k, :horizon] * scale
            np.testing.assert_array_equal(np.array(answer[f"lo-{level}"], np.float32), f - width)
            np.testing.assert_array_equal(np.array(answer[f"hi-{level}"], np.float32), f + width)
    r = client.post("/v1/models/etth1-rsa/versions/2/forecast", json=request)
    assert r.status_code == 422 and r.json()["error"]["field"] == "level"


def test_version_1_has_no_cycle_and_needs_no_start(client):
    """Written before the seasonal cycle existed: no `cycle` key, `window` only, `start` optional."""
    manifest = json.loads((V1 / "manifest.json").read_text())
    assert manifest.get("cycle") is None and [i["name"] for i in manifest["inputs"]] == ["window"]
    _, values = etth1_rows(12000, 100)
    r = client.post("/v1/models/etth1-rsa/versions/1/forecast", json={"series": [{"values": values}]})
    assert r.status_code == 200, r.text
    (fc,) = r.json()["forecasts"]
    assert fc["timestamps"] is None
    expected = ort_forecast(V1 / "model.onnx", np.array([values[-96:]], np.float32))
    np.testing.assert_allclose(np.array(fc["forecast"]), expected[0], atol=1e-5, rtol=0)


def test_version_3_attention_mixed_is_the_gated_sum(client):
    stamps, values = etth1_rows(12000, 96)
    start = stamps[0].replace(" ", "T")
    series = {"values": values, "start": start}
    r = client.post("/v1/models/etth1-rsa/versions/3/attention", json={"series": series, "channel": "OT"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["query"] == "all"
    soft, rem, mixed = ort_run(
        V3 / "inspect.onnx",
        np.array([values], np.float32),
        ["attn_softmax", "attn_rem", "attn_mixed"],
        [hour_phase(start)],
    )
    heads = body["layers"][0]["heads"]
    assert len(heads) == 4
    for h, head in enumerate(heads):
        g = head["gate"]
        s, p, m = (np.array(head["matrices"][k]) for k in ("softmax", "rem", "mixed"))
        np.testing.assert_allclose(s, soft[0, 6, 0, h], atol=1e-6)
        np.testing.assert_allclose(p, rem[0, h], atol=1e-6)
        np.testing.assert_allclose(m, mixed[0, 6, 0, h], atol=1e-6)
        np.testing.assert_allclose(m, (1 - g) * s + g * p, atol=1e-5)


def test_default_attention_is_the_last_querys_row_per_head(client):
    """Version 5 reads its last step: per head the last query's softmax, REM and mixed rows over the 512
    keys, the REM row that of the head's linear RNN (λ^t at lag t), the mixed row the REM's alone (gates
    1), and a PNG of 87 heads x lags."""
    stamps, values = etth1_rows(12000, L)
    start = stamps[0].replace(" ", "T")
    request = {"series": {"values": values, "start": start}, "channel": "OT"}
    r = client.post("/v1/models/etth1-rsa/attention", json=request)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["version"], body["query"], body["input_length"]) == (5, "last", L)
    soft, rem, mixed = ort_run(
        DEFAULT / "inspect.onnx",
        np.array([values], np.float32),
        ["attn_softmax", "attn_rem", "attn_mixed"],
        [hour_phase(start)],
    )
    assert rem.shape == (1, 87, L) and soft.shape == mixed.shape == (1, 7, 1, 87, L)
    heads = body["layers"][0]["heads"]
    assert len(heads) == 87 and {h["kind"] for h in heads} == {"regular", "cyclic_cos", "cyclic_sin"}
    for h, head in enumerate(heads):
        g = head["gate"]
        assert g == 1.0  # σ(30) in float32: the softmax half has weight 0
        s, p, m = (np.array(head["matrices"][k]) for k in ("softmax", "rem", "mixed"))
        assert s.shape == (L,)
        np.testing.assert_allclose(s, soft[0, 6, 0, h], atol=1e-6)
        np.testing.assert_allclose(p, rem[0, h], atol=1e-6)
        np.testing.assert_allclose(m, (1 - g) * s + g * p, atol=1e-5)
        if head["kind"] == "regular" and head["dilation"] == 1:
            lags = np.arange(L - 1, -1, -1.0)
            np.testing.assert_allclose(p[:-1], head["lambda"] ** lags[:-1], rtol=1e-4, atol=1e-6)
            assert p[-1] == 0.0  # strictly causal: nothing at lag 0
    png = client.post("/v1/models/etth1-rsa/attention", params={"format": "png"}, json=request)
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    width, height = int.from_bytes(png.content[16:20], "big"), int.from_bytes(png.content[20:24], "big")
    # one figure, not 87 x 3 panels: one labelled row of 30 px per head (8-point labels stay legible)
    assert 800 < width < 2000 and 87 * 30 < height < 3200


@pytest.mark.parametrize("version", [3, 5])
def test_attention_json_parses_as_the_pydantic_encoder_wrote_it(client, version):
    """The orjson answer of the default (last-query rows, one per head) and of version 3 (L×L matrices)
    against the pydantic encoder's, from the same document."""
    n = L if version == 5 else 96
    stamps, values = etth1_rows(12000, n)
    series = {"values": values, "start": stamps[0].replace(" ", "T")}
    url = f"/v1/models/etth1-rsa/versions/{version}/attention"
    answer = assert_encoded_as_before(client, url, {"series": series})
    assert answer["query"] == ("last" if version == 5 else "all")


def test_served_without_torch(tmp_path):
    """A fresh process in which importing torch fails still loads and serves the shipped model."""
    code = f"""
import sys
sys.modules["torch"] = None  # any import of torch now raises ImportError
sys.path.insert(0, {str(ROOT)!r})
from fastapi.testclient import TestClient
from app.core.config import Settings
from app.main import create_app
import time
settings = Settings(model_repository={str(REPOSITORY)!r}, device="cpu", intra_op_threads=1)
with TestClient(create_app(settings)) as c:
    for _ in range(500):
        if c.get("/readyz").status_code == 200:
            break
        time.sleep(0.02)
    one = {{"values": [[1.0] * 7] * {L}, "start": "2018-01-01T05:00:00"}}
    r = c.post("/v1/models/etth1-rsa/forecast", json={{"series": [one]}})
    assert r.status_code == 200, r.text
    assert len(r.json()["forecasts"][0]["forecast"]) == 96
print("served")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "served" in proc.stdout
