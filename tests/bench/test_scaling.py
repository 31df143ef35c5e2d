"""bench.scaling: the smoke form (two tiny input lengths, session and server tables). No timing is
asserted; the server's answers are checked against onnxruntime by the load client."""

from __future__ import annotations

import pytest

from bench import scaling
from tests.bench.tables import table_rows


def test_smoke_run_measures_sessions_and_the_server(capsys: pytest.CaptureFixture[str]) -> None:
    scaling.main(["--smoke"])
    out = capsys.readouterr().out
    sessions = table_rows(out, "L")
    assert [r["L"] for r in sessions] == ["16", "32"], out
    servers = table_rows(out.split("2. `python -m app`", 1)[1], "L")
    assert [(r["L"], r["series"]) for r in servers] == [("16", "1"), ("16", "4"), ("32", "1"), ("32", "4")]
    for r in servers:
        assert r["requests"] == "3" and r["errors"] == "0", out
        assert r["per call"] == r["series"], out  # tiny windows: RSA_MAX_BATCH_ROWS is the only cap
        assert float(r["peak MiB"]) >= float(r["ready MiB"]) > 0, out


def test_lengths_must_ascend() -> None:
    with pytest.raises(SystemExit):
        scaling.parse_args(["--lengths", "192,96"])
