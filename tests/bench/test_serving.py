"""bench.serving: the smoke form, every server started, loaded and stopped on loopback (LitServe
installed on first use), every answer checked. No timing is asserted: only that each cell ran
cleanly and the report states every target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import serving


def test_smoke_run_measures_every_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "serving.json"
    code = serving.main(["--smoke", "--json", str(report)])
    out = capsys.readouterr().out
    data = json.loads(report.read_text())
    assert code == 0 and data["passed"], out
    servers = {s["server"]: s for s in data["servers"]}
    assert set(servers) == {s.key for s in serving.SERVERS}, out
    for key, run in servers.items():
        assert run["error"] is None, (key, run["error"])
        cells = {(c["concurrency"], c["series_per_request"]) for c in run["cells"]}
        expected = {(1, 1), (4, 1)} | ({(2, 256)} if key in ("minimal", "litserve", "service") else set())
        assert cells == expected, (key, cells)
        for c in run["cells"]:
            assert c["errors"] == {} and c["completed"] == c["requests"], (key, c)
            assert c["server_cpu_ms_per_request"] >= 0, (key, c)  # measured (20 fast requests: <1 tick)
    assert servers["service"]["cells"][0]["parsed_answers"] >= 1  # compared with onnxruntime, not trusted
    targets = {t["what"]: t for t in data["targets"]}
    assert "service / minimal req/s, c=1" in targets and "service p50 − minimal p50, c=1 (ms)" in targets
    assert "service windows/s ÷ raw ORT batch 256" in targets
    assert all(t["value"] is not None and t["met"] is not None for t in targets.values()), targets
    assert "| this service (`python -m app`) |" in out
