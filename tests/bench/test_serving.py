"""bench.serving: the smoke form, every server started, loaded and stopped on loopback (LitServe, when
not installed, reported as skipped with its install command), every answer checked. No timing is
asserted: only that each cell ran cleanly and the report states every target. And the OIP v2
binary-tensor row's bodies and checker, shown to catch wrong answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.protocols.oip_v2.codec import InferResult, encode_response, parse_infer
from bench import serving, serving_servers
from bench.harness.checks import OipBinaryChecker
from bench.harness.load import Failure
from bench.harness.workloads import Workload, oip_binary_workload, prepare_forecast_workload, windows_of


def test_smoke_run_measures_every_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "serving.json"
    code = serving.main(["--smoke", "--json", str(report)])
    out = capsys.readouterr().out
    data = json.loads(report.read_text())
    assert code == 0 and data["passed"], out
    servers = {s["server"]: s for s in data["servers"]}
    assert set(servers) == {s.key for s in serving_servers.SERVERS}, out
    skipped = {key for key, run in servers.items() if run["skipped"] is not None}
    assert skipped <= {"litserve"}, skipped  # LitServe alone lives apart from .venv
    if "litserve" in skipped:  # not installed here: said, with the command that installs it, not run
        assert servers.pop("litserve")["cells"] == []
        assert "pip install --no-deps --target .venv/litserve" in out, out
        assert "| LitServe, batching on (64 requests, 2 ms) — skipped (not installed) |" in out, out
    for key, run in servers.items():
        assert run["error"] is None, (key, run["error"])
        cells = {(c["concurrency"], c["series_per_request"], c["protocol"]) for c in run["cells"]}
        expected = {(1, 1, "v1"), (4, 1, "v1")}
        expected |= {(2, 256, "v1")} if key in ("minimal", "litserve", "service") else set()
        expected |= {(2, 256, "v2-binary")} if key == "service" else set()
        assert cells == expected, (key, cells)
        for c in run["cells"]:
            assert c["errors"] == {} and c["completed"] == c["requests"], (key, c)
            assert c["server_cpu_ms_per_request"] >= 0, (key, c)  # measured (20 fast requests: <1 tick)
    assert servers["service"]["cells"][0]["parsed_answers"] >= 1  # compared with onnxruntime, not trusted
    v2 = servers["service"]["cells"][-1]
    assert v2["protocol"] == "v2-binary" and v2["parsed_answers"] >= 1, v2
    assert v2["warmup"] == 2 and v2["checked"] == 4, v2  # one warm-up per connection, as the JSON cell
    targets = {t["what"]: t for t in data["targets"]}
    assert "service / minimal req/s, c=1" in targets and "service p50 − minimal p50, c=1 (ms)" in targets
    assert "service windows/s ÷ raw ORT batch 256" in targets
    assert "service (OIP v2 binary) windows/s ÷ raw ORT batch 256" in targets
    judged = {w: t for w, t in targets.items() if not (skipped and "litserve" in w)}
    assert all(t["value"] is not None and t["met"] is not None for t in judged.values()), targets
    assert all(t["value"] is None and t["met"] is None for w, t in targets.items() if w not in judged)
    # A second round of the minimal server and the service: the targets against the minimal server are
    # the median of both rounds' ratios, each from cells that ran cleanly.
    assert len(data["rounds"]) == 1, data["rounds"]
    for run in data["rounds"][0].values():
        assert run["error"] is None and [c["concurrency"] for c in run["cells"]] == [1, 4], run
        assert all(c["errors"] == {} and c["completed"] == c["requests"] for c in run["cells"]), run
    first, second = data["servers"], data["rounds"][0]
    rps = {
        s["server"]: s["cells"][0]["throughput_rps"] for s in first if s["server"] in ("minimal", "service")
    }
    again = {k: v["cells"][0]["throughput_rps"] for k, v in second.items()}
    c1 = targets["service / minimal req/s, c=1"]
    assert c1["rounds"] == pytest.approx(
        [rps["service"] / rps["minimal"], again["service"] / again["minimal"]]
    )
    assert c1["value"] == pytest.approx(sum(c1["rounds"]) / 2)  # the median of two
    assert all(len(t["rounds"]) == 2 for w, t in targets.items() if "minimal" in w), targets
    assert "| this service (`python -m app`) |" in out
    assert "| this service, OIP v2 binary tensors (`/v2/.../infer`) |" in out
    assert "| 256 series, c=2, OIP v2 binary |" in out


@pytest.fixture(scope="module")
def workloads() -> tuple[Workload, Workload]:
    """Two-series /v1 bodies and the same windows as OIP v2 binary-tensor bodies."""
    v1 = prepare_forecast_workload(windows=4, series_per_request=2)
    return v1, oip_binary_workload(v1)


def test_v2_bodies_are_the_v1_windows_as_binary_tensors(workloads: tuple[Workload, Workload]) -> None:
    v1, v2 = workloads
    assert v2.path == "/v2/models/etth1-rsa/versions/1/infer"
    assert v2.content_type == "application/octet-stream" and len(v2.bodies) == len(v1.bodies)
    cut = int(v2.headers["Inference-Header-Content-Length"])
    header = json.loads(v2.bodies[0][:cut])
    assert header == {
        "inputs": [
            {
                "name": "window",
                "datatype": "FP32",
                "shape": [2, 96, 7],
                "parameters": {"binary_data_size": 5376},
            }
        ],
        "outputs": [{"name": "forecast", "parameters": {"binary_data": True}}],
    }
    for body, windows in zip(v2.bodies, windows_of(v1), strict=True):
        assert body[:cut] == v2.bodies[0][:cut]  # one header, one Inference-Header-Content-Length
        # What the service's codec decodes is exactly the /v1 bodies' windows.
        request, (tensor,) = parse_infer(body, None, str(cut), len(body))
        assert tensor.name == "window" and np.array_equal(tensor.array, windows)
        assert request.outputs is not None and request.outputs[0].name == "forecast"


def _v2_answer(v2: Workload, b: int, binary: bool = True) -> bytes:
    """What the service's codec writes for body `b`, the forecast the reference itself."""
    result = InferResult("etth1-rsa", "1", None, {"forecast": v2.checker.expected[b]})
    return encode_response(result, {"forecast"} if binary else set())[0]


def _fresh(v2: Workload) -> OipBinaryChecker:
    check = serving_servers.fresh_checker(next(s for s in serving_servers.SERVERS if s.key == "service"), v2)
    assert isinstance(check, OipBinaryChecker)
    return check


def test_v2_checker_passes_a_right_answer_and_memoises_it(workloads: tuple[Workload, Workload]) -> None:
    _, v2 = workloads
    check = _fresh(v2)
    good = _v2_answer(v2, 1)
    assert check(1, good) is None
    assert check(1, good) is None
    assert (check.parsed, check.memo_hits) == (1, 1)
    failure = check(0, good)  # a verified answer for body 1 says nothing about body 0
    assert failure is not None and failure.kind == "mismatch", failure


@pytest.mark.parametrize(
    ("tamper", "kind", "says"),
    [
        ("one_value", "mismatch", "forecast[1] (b1s1w3)"),
        ("scaled", "mismatch", "off the reference"),
        ("nan", "bad_body", "non-finite"),
        ("size_said", "bad_body", "binary_data_size 5372"),
        ("short_binary", "bad_body", "no JSON header"),
        ("float64", "bad_body", "no JSON header"),
        ("shape", "bad_body", "expected forecast FP32 [2, 96, 7]"),
        ("wrong_version", "bad_body", "answered by"),
        ("json_data", "bad_body", "no JSON header"),
        ("empty", "bad_body", "no room"),
    ],
)
def test_v2_checker_catches_a_wrong_answer(
    workloads: tuple[Workload, Workload], tamper: str, kind: str, says: str
) -> None:
    _, v2 = workloads
    check = _fresh(v2)
    good = _v2_answer(v2, 1)
    assert check(1, good) is None  # memoised: the tampered one must not hit
    size = 2 * 96 * 7 * 4
    header, values = json.loads(good[:-size]), np.frombuffer(good[-size:], "<f4").reshape(2, 96, 7).copy()
    tail: bytes | None = None  # the binary part, when not the (tampered) values
    if tamper == "one_value":
        values[1, 50, 6] += 0.05
    elif tamper == "scaled":
        values *= 1.001
    elif tamper == "nan":
        values[0, 0, 0] = np.nan
    elif tamper == "size_said":
        header["outputs"][0]["parameters"]["binary_data_size"] = size - 4
    elif tamper == "short_binary":
        tail = values.tobytes()[:-4]
    elif tamper == "float64":
        header["outputs"][0]["parameters"]["binary_data_size"] = 2 * size
        tail = values.astype("<f8").tobytes()
    elif tamper == "shape":
        header["outputs"][0]["shape"] = [2, 7, 96]
    elif tamper == "wrong_version":
        header["model_version"] = "2"
    payload = json.dumps(header).encode() + (values.tobytes() if tail is None else tail)
    if tamper == "json_data":
        payload = _v2_answer(v2, 1, binary=False)
    elif tamper == "empty":
        payload = b""
    failure = check(1, payload)
    assert isinstance(failure, Failure) and failure.kind == kind and says in failure.detail, failure
