"""bench.batch: the smoke form end to end (synthetic parts, the raw session, the batch command on a local
Ray, the client through a service), its table and JSON written. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import batch


def test_smoke_run_measures_the_three_contenders(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    batch.main(["--smoke", "--threads", "1", "--json", str(tmp_path / "batch.json")])
    out = capsys.readouterr().out
    for contender in (
        "raw session (best batch)",
        "batch command (workers at nice 0)",
        "client through the service",
    ):
        line = next(x for x in out.splitlines() if x.startswith(contender))
        assert float(line[len(contender) :].split()[0].replace(",", "")) > 0, out
    assert "peak resident memory (PSS) of the batch job's process tree" in out
    saved = json.loads((tmp_path / "batch.json").read_text())
    assert saved["series"] == 400 and saved["client_series"] == 200 and saved["client_series_done"] == 200
    done = saved["batch"]
    assert (
        done["finished"]
        and done["series"] == 400
        and done["peak_pss_mib"] > 0
        and done["worker_niceness"] == 0
    )
    assert saved["batch_so_far"]["series"] == 400  # checkpointed after every part
    assert len(saved["raw_windows_per_s"]) == 3  # before the batch job, after it, after the client
