"""bench.workers: the smoke form end to end (one process against two front ends and their engine process,
the transport round trip, a small flood), every answer checked. No timing is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import workers
from tests.bench.tables import table_rows


def test_smoke_run_compares_one_process_with_two_front_ends(capsys: pytest.CaptureFixture[str]) -> None:
    workers.main(["--smoke"])
    out = capsys.readouterr().out
    rows = table_rows(out, "round")
    assert {(r["workers"], r["c"], r["series"]) for r in rows} == {
        (w, c, s) for w in ("1", "2") for c, s in (("1", "1"), ("4", "1"), ("4", "8"))
    }, out
    assert all(r["errors"] == "0" and float(r["req/s"]) > 0 for r in rows), out
    assert "2 front ends / 1, one-window c=1: throughput x" in out and "8-series c=4" in out, out
    transport = table_rows(out, "rows")
    assert [r["rows"] for r in transport] == ["1", "256"] and float(transport[0]["through the engine ms"]) > 0
    floods = table_rows(out, "workers")
    assert [f["workers"] for f in floods] == ["1", "2"], out
    assert all(int(f["200"]) + int(f["503"]) == 6 and f["504"] == "0" for f in floods), out


def test_the_device_is_an_option_not_pinned_to_the_cpu(tmp_path: Path) -> None:
    """The GPU lane measures front ends x engine on CUDA: --device reaches every service's RSA_DEVICE."""
    assert workers.parse_args([]).device == "cpu"
    assert workers.parse_args(["--device", "cuda"]).device == "cuda"
    assert workers._env(8, tmp_path, "cuda")["RSA_DEVICE"] == "cuda"
    assert (
        workers._env(8, tmp_path)["RSA_DEVICE"] == "cpu" and workers._env(8, tmp_path)["RSA_WORKERS"] == "8"
    )
