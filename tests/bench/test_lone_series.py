"""bench.lone_series: a smoke run on series too short to validate, scored apart beside statsforecast."""

from __future__ import annotations

from bench.lone_series import main, table


def test_a_smoke_run_trains_series_too_short_to_validate(tmp_path) -> None:
    """Tourism yearly's 15 histories of 7 years (H 4: validation needs min_history + 2H = 10) were refused
    until 2026-12-08; they train on fixed choices now and are scored apart."""
    out = tmp_path / "lone.json"
    assert main(["--data", "Tourism:yearly", "--short", "--json", str(out)]) == 0
    import json

    (r,) = json.loads(out.read_text())["sets"]
    assert r["picked"] == 15 and r["trained"] == 15 and r["unvalidated"] == 15 and r["refused"] == 0
    assert r["levels"] == {"none above 50": 15}  # nothing left to calibrate on
    assert r["mase_unvalidated"] == r["mase"]  # every one of them too short to validate
    assert {"ours (the hybrid)", "StatisticalEnsemble", "SeasonalNaive"} <= set(r["mase"])
    assert "shipped pretrained-yearly (zero-shot)" in r["mase"]  # through the service, the same series
    shipped = r["coverage_80_shipped"]
    assert shipped["series"] == 15 and 0 <= shipped["coverage"] <= 1 and shipped["where_ours_has_80"] is None
    assert "(15 too short to validate)" in table(r)
