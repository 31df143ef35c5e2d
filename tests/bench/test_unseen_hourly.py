"""bench.unseen_hourly: the hourly series read onto their grid, the origins cut as documented, and a smoke
run's rows scored as the answers say."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bench.unseen_hourly import HOURLY, cut, filled, hourly_series, main

H = HOURLY.horizon


def test_the_series_are_read_onto_an_hourly_grid() -> None:
    series = hourly_series()
    assert len(series) == 12
    assert len(series["elecdemand:Demand"]) == 365 * 24  # 2014's half-hours, two to an hour
    assert len(series["taylor:demand"]) == 12 * 7 * 24
    weather = {k: v for k, v in series.items() if k.startswith("weather:")}
    assert len(weather) == 9 and all(8000 < len(v) < 8800 for v in weather.values())
    assert all(np.isnan(v).any() for k, v in weather.items() if k.endswith(":temp"))  # missing hours kept


def test_origins_step_back_from_the_end_and_skip_what_cannot_be_scored() -> None:
    values = np.arange(400.0)
    values[400 - H - 1] = np.nan  # in the future of the origin 25 hours back alone (a later one's history)
    cases = cut({"a:x": values}, origins=4, step=25, context=200)
    assert [c.origin for c in cases] == [0, 50, 75]  # 25 hours back has a missing hour to score
    assert all(len(c.history) == 200 and len(c.future) == H for c in cases)
    np.testing.assert_array_equal(cases[0].future, values[-H:])
    assert cut({"a:x": values}, origins=4, step=25, context=400) == []  # no room for the history
    np.testing.assert_array_equal(filled(np.array([np.nan, 1.0, np.nan, 3.0])), [1.0, 1.0, 2.0, 3.0])


@pytest.mark.slow
def test_a_smoke_run_scores_the_service_and_a_peer_on_the_same_cases(tmp_path: Path) -> None:
    out = tmp_path / "hourly.json"
    report = main(["--origins", "1", "--peers", "SeasonalNaive", "--json", str(out)])
    assert json.loads(out.read_text()) == report
    assert report["cases"] == 12  # each series' last 48 hours
    ours, naive = report["results"].values()
    for row in (ours, naive):
        assert row["mase"] > 0 and 0 <= row["coverage_80"] <= 1
        assert sum(s["cases"] for s in row["per_source"].values()) == 12
        assert abs(row["coverage_80"] * 12 * H - round(row["coverage_80"] * 12 * H)) < 1e-9


def test_the_read_out_alone_leaves_the_local_half_out_of_the_shipped_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.pretrained_coverage as coverage
    import export.pretrained as pretrained
    from bench.unseen_hourly import Case, readout_alone

    @dataclasses.dataclass(frozen=True)
    class Model:
        """Forecasts 1 with its local half, 2 without."""

        local: object = "members"

        def forecast(self, histories: list[np.ndarray]) -> np.ndarray:
            assert not any(np.isnan(h).any() for h in histories)  # filled, as the trained hybrids read them
            return np.full((len(histories), H), 1.0 if self.local is not None else 2.0)

    monkeypatch.setattr(pretrained, "train_pretrained", lambda spec, series: (Model(), None, None))
    monkeypatch.setattr(coverage, "shipped", lambda spec: ({}, "sha"))
    history = np.r_[np.nan, np.arange(1.0, 100.0)]
    case = Case("a:x", 0, history, np.zeros(H))
    monkeypatch.setattr(coverage, "same_graph", lambda model, sha: True)
    point, _ = readout_alone([case])
    np.testing.assert_array_equal(point, np.full((1, H), 2.0))
    monkeypatch.setattr(coverage, "same_graph", lambda model, sha: False)
    with pytest.raises(SystemExit, match="not the shipped one"):
        readout_alone([case])
