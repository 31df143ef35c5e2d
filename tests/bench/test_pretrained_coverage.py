"""bench.pretrained_coverage's smoke run (issues 43 and 47): the shipped pretrained-yearly trained again
(its graph checked equal to the shipped one) and its intervals at every level scored on a slice of the
M3 and Tourism yearly hold-outs."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bench.pretrained_coverage import main, scored


@pytest.mark.slow  # trains the yearly model (about 3 s)
def test_smoke_run_scores_every_level_of_the_shipped_yearly_model(tmp_path: Path) -> None:
    out = tmp_path / "coverage.json"
    assert main(["--only", "yearly", "--limit", "30", "--json", str(out)]) == 0
    (model,) = json.loads(out.read_text())["models"]
    assert model["model"] == "pretrained-yearly"
    assert model["rule"] in {"split_conformal", "split_conformal_drift"}
    assert [r["held_out"] for r in model["rows"]] == [
        "M3 yearly official hold-outs",
        "Tourism yearly official hold-outs",
    ]
    for row in model["rows"]:
        shares = list(row["coverage"].values())
        assert list(row["coverage"]) == ["50", "80", "90", "95", "99"]
        assert row["series"] == 30 and row["values"] == 30 * (6 if row["held_out"].startswith("M3") else 4)
        assert all(0.0 <= a <= b <= 1.0 for a, b in itertools.pairwise(shares))
        assert row["mase"] > 0 and row["mase_readout_alone"] > 0


@dataclass(frozen=True)
class _Flat:
    """A model stand-in for `scored`: forecasts 0 everywhere, 1 with its local half left out."""

    local: object = "members"
    config: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(period=1))

    def forecast(self, histories: list[np.ndarray]) -> np.ndarray:
        return np.full((len(histories), 3), 0.0 if self.local is not None else 1.0)


def test_scored_counts_the_values_inside_each_level_skips_missing_and_scores_both_forecasts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.pretrained_coverage as pc

    half = np.array([[[1.0, 1.0, 1.0]], [[2.0, 2.0, 2.0]]])  # two levels, one series, three steps
    monkeypatch.setattr(pc, "interval_halfwidths", lambda intervals, model, histories: half)
    future = np.array([[0.5, 1.5, np.nan]])
    done = scored({}, _Flat(), [np.arange(5.0)], future)  # type: ignore[arg-type]
    assert done.inside == [1, 2]
    # the in-sample naive error of 0, 1, 2, 3, 4 is 1: a missing value leaves that series' MASE undefined
    assert np.isnan(done.mase[0]) and np.isnan(done.mase_readout[0])
    complete = scored({}, _Flat(), [np.arange(5.0)], np.array([[0.5, 1.5, 3.0]]))  # type: ignore[arg-type]
    np.testing.assert_allclose(complete.mase, [(0.5 + 1.5 + 3.0) / 3])
    np.testing.assert_allclose(complete.mase_readout, [(0.5 + 0.5 + 2.0) / 3])
