"""bench.attention_encoding on a shipped version (the service's own answer), two rounds, so it does not rot.
No timing is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import attention_encoding

ROOT = Path(__file__).resolve().parents[2]


def test_both_encoders_are_timed_on_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    attention_encoding.main([str(ROOT / "model_repository" / "etth1-rsa" / "3"), "--repeats", "2"])
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[3:]}  # after the header's rule
    assert set(rows) == {"pydantic", "orjson"}, out
    (ms, size, ratio), (base_ms, base_size, base_ratio) = rows["orjson"], rows["pydantic"]
    assert float(ms) > 0 and float(base_ms) > 0 and float(base_ratio) == 1.0 and float(ratio) > 0, out
    assert 0 < int(size) < int(base_size), out  # the same numbers in their float32 form: fewer bytes
    assert "4 heads, query all, L=96" in out.splitlines()[0], out
