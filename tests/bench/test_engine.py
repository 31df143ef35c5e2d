"""bench.engine: the smoke form end to end (a brief training on ETTh1, the project's export, both
engines on the same weights), and the helpers the other benches share. No timing is asserted."""

from __future__ import annotations

import pytest

from bench import engine
from bench.harness import measure, models
from export.onnx import TOLERANCE
from tests.bench.tables import table_rows


def test_smoke_run_compares_the_same_weights_in_both_engines(capsys: pytest.CaptureFixture[str]) -> None:
    engine.main(["--smoke"])
    out = capsys.readouterr().out
    rows = table_rows(out, "batch")
    assert [r["batch"] for r in rows] == ["1", "8"], out
    for r in rows:
        assert float(r["max|diff|/std"]) <= TOLERANCE, out  # the two engines computed the same forecasts
        assert float(r["torch/ORT"]) > 0 and float(r["ORT win/s"]) > 0 and float(r["torch win/s"]) > 0, out
        assert 1 <= int(r["rounds"]) <= 3, out
    assert "ORT >= 2x faster at batch 1: " in out and "ORT ahead at every batch size: " in out, out


def test_interleaved_is_bounded_and_rotates_the_order() -> None:
    calls: list[str] = []
    cases = {name: (lambda name=name: calls.append(name)) for name in ("a", "b")}
    times = measure.interleaved(cases, repeats=4, budget_s=60.0)
    assert {k: len(v) for k, v in times.items()} == {"a": 4, "b": 4}
    warmup, rounds = calls[:2], calls[2:]
    assert warmup == ["a", "b"] and rounds == ["a", "b", "b", "a", "a", "b", "b", "a"]  # order rotated
    calls.clear()
    once = measure.interleaved(cases, repeats=1000, budget_s=0.0)  # out of time: one round, not 1000
    assert {k: len(v) for k, v in once.items()} == {"a": 1, "b": 1}


def test_smoke_sizes_give_way_to_flags_given_with_them() -> None:
    args = engine.parse_args(["--smoke", "--threads", "2", "--batches", "1"])
    assert (args.batches, args.repeats, args.train_windows, args.threads) == ((1,), 3, 0, 2)
    assert engine.parse_args([]).batches == (1, 8, 64, 256)


def test_format_table_aligns_columns() -> None:
    text = engine.format_table(["name", "ms"], [["a", "1.5"], ["long name", "12.25"]])
    assert text.splitlines() == [
        "name          ms",
        "----------------",
        "a            1.5",
        "long name  12.25",
    ]


def test_cuda_is_refused_where_it_cannot_run() -> None:
    """`--device cuda` never times the CPU instead: without a GPU the session would fall back, so the
    bench stops; on a GPU host the session really runs on CUDA."""
    from app.engine.providers import CUDA

    model = models.SHIPPED_MODEL / "1" / "model.onnx"
    try:
        session = models.ort_session(model, 1, "cuda")
    except SystemExit as exc:
        assert "asked for CUDAExecutionProvider" in str(exc)
    else:
        assert session.get_providers()[0] == CUDA
    assert models.ort_session(model, 1, "cpu").get_providers()[0] == "CPUExecutionProvider"
