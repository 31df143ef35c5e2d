"""bench.front_end_kills: the smoke form end to end (two front ends, one killed under the three kinds of
callers), its report and table. Which kinds lose calls is the bench's finding; the client's losing none is
asserted in tests/app/test_workers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import front_end_kills


def test_smoke_run_kills_a_front_end_under_every_kind_of_caller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = front_end_kills.main(["--kills", "1", "--callers", "1", "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert report["kills"] == 1, out
    kinds = ["rsa_client", "kept-alive, no retry", "a connection per call"]
    assert list(report["kinds"]) == kinds, out
    assert all(report["kinds"][k]["answered"] > 0 for k in kinds), out
    assert [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")][1:] == kinds
    assert report["kinds"]["rsa_client"]["lost"] == 0, out
    assert (tmp_path / "r.json").read_text().startswith("{")
