"""The results page is computed from the reports, targets judged from the numbers."""

from __future__ import annotations

import dataclasses
import json

from export.results import collect, interval_section, render, shipped_interval_targets
from export.results_readout import beats, sweep_section, training_table
from tests.utils.reports import full


def typed(r: dict):
    from export.reports import TrainingReport, build

    return build(TrainingReport, full(r))


def report(tmp_path, data, variant, horizon, seed, mse, **extra):
    d = tmp_path / f"{data}-{variant}-{horizon}-{seed}"
    d.mkdir()
    heads = [{"kind": "regular", "dilation": 1, "lambda": 0.9, "gamma": None, "theta": None, "gate": 0.4}]
    r = {
        "name": d.name,
        "variant": variant,
        "seed": seed,
        "data": {"name": data, "mode": "M"},
        "model_config": {"input_length": 96, "horizon": horizon},
        "test": {"mse": mse, "mae": mse / 2},
        "val": {"mse": 2 * mse},
        "seconds_per_epoch": 50.0,
        "recurrence": [{"layer": 0, "heads": heads}],
    }
    r.update(extra)
    (d / "report.json").write_text(json.dumps(full(r)))


def test_render_means_targets_and_paper_comparison(tmp_path):
    for seed, mse in enumerate([0.36, 0.38, 0.39]):
        report(tmp_path, "ETTh1", "rsa", 96, seed, mse)
    report(tmp_path, "ETTh1", "baseline", 96, 0, 0.385)
    for h, (rsa, base) in {192: (0.42, 0.43), 336: (0.45, 0.44), 720: (0.46, 0.47)}.items():
        report(tmp_path, "ETTh1", "rsa", h, 0, rsa)
        report(tmp_path, "ETTh1", "baseline", h, 0, base)
    report(tmp_path, "ETTh1", "rsa", 24, 0, 0.30)
    page = render(collect(tmp_path))
    assert "| 96 | 0.377 ± 0.015 | 0.188 ± 0.008 | 0.385 | 0.193 | yes | — | 0.753/0.770 |" in page
    assert "RSA MSE at horizon 96 ≤ 0.380: 0.377 — met" in page
    assert "0.427 — met" in page  # (0.3767 + 0.42 + 0.45 + 0.46) / 4
    assert "wins at [96, 192, 720] of [96, 192, 336, 720] — met" in page
    assert "| 24 | 0.414 | 0.300 | yes |" in page
    assert "| 48 | 0.467 | — | — |" in page


def test_recipe_and_step0_linear_columns(tmp_path):
    ls = {"linear_path": "least_squares", "lr": 1e-4, "epochs": 4}
    for seed, lin in enumerate([0.372, 0.374]):
        report(
            tmp_path,
            "ETTh1",
            "rsa",
            96,
            seed,
            0.37,
            config=ls,
            linear_fit={"val_mse": 0.69, "test_mse": lin},
            model_config={"input_length": 96, "horizon": 96, "cycle_period": 24},
        )
    report(
        tmp_path,
        "ETTh1",
        "baseline",
        96,
        0,
        0.375,
        config=ls,
        model_config={"input_length": 96, "horizon": 96, "cycle_period": 24},
    )
    page = render(collect(tmp_path))
    row = next(line for line in page.splitlines() if line.startswith("| 96 |"))
    assert "| 0.373 |" in row  # mean step-0 linear test MSE of the RSA runs
    assert row.endswith("| LS+net lr 0.0001 × 4 ep, cycle 24 |")


def test_multi_seed_rounds_are_summarised_and_single_runs_listed(tmp_path):
    tuning = []
    for variant, vals in {"rsa": [0.68, 0.70], "base": [0.69, 0.71]}.items():
        for seed, val in enumerate(vals):
            tuning.append(
                {
                    "name": f"N-h096-{variant}-s{seed}",
                    "variant": "rsa" if variant == "rsa" else "baseline",
                    "seed": seed,
                    "config": {"linear_path": "least_squares", "lr": 1e-4, "epochs": 4, "rem_lr_mult": 10},
                    "linear_fit": {"val_mse": 0.75},
                    "model_config": {"horizon": 96, "cycle_period": 24, "head": "last"},
                    "val": {"mse": val},
                    "test": {"mse": val / 2},
                }
            )
    single = {
        "name": "A",
        "variant": "rsa",
        "seed": 0,
        "config": {"lr": 1e-3, "epochs": 8},
        "model_config": {
            "horizon": 96,
            "d_model": 16,
            "dropout": 0.2,
            "rem_heads": [2, 1, 1, 0, 0, 0],
            "dilation": 2,
            "gate": "layer",
            "mu_init": 0.0,
            "positional": "none",
        },
        "val": {"mse": 0.7},
        "test": {"mse": 0.38},
    }
    page = render({}, [typed(r) for r in [*tuning, single]])
    assert (
        "| N | 96 | LS+net lr 0.0001 × 4 ep, cycle 24, last-step head | 10 | 2/2 | 0.7500 |"
        " 0.6900 | 0.7000 | 0.3450 | 0.3500 |" in page
    )
    assert "| A | rsa | 96 | 16 |" in page
    assert "| N-h096-" not in page  # round runs appear only in the summary


def test_round_wins_are_counted_from_mean_test_mse(tmp_path):
    tuning = []
    tests = {96: (0.40, 0.44), 192: (0.44, 0.47), 336: (0.46, 0.48), 720: (0.50, 0.49)}
    for h, (rsa, base) in tests.items():
        for variant, mse in (("rsa", rsa), ("base", base)):
            for seed in (0, 1):
                tuning.append(
                    {
                        "name": f"T-h{h:03d}-{variant}-s{seed}",
                        "variant": "rsa" if variant == "rsa" else "baseline",
                        "seed": seed,
                        "config": {"lr": 1e-3, "epochs": 8},
                        "model_config": {"horizon": h, "head": "last"},
                        "val": {"mse": 2 * mse},
                        "test": {"mse": mse + 0.01 * seed},
                    }
                )
    tuning.append({**tuning[0], "name": "U-h096-rsa-s0"})  # a round missing horizons is not judged
    page = render({}, [typed(r) for r in tuning])
    assert "round T: [96, 192, 336] (3 of 4)." in page
    assert "round U" not in page
    row = next(line for line in page.splitlines() if line.startswith("| T | 720 |"))
    assert row.endswith("| 0.5050 | 0.4950 | no/no |")


def readout_report(tmp_path, data, horizon, seed, mse, ls, rem_origins, both_origins, minutes=2.0):
    """A run of the REM read-out: test MSE, full LS, and the refitted ablations."""
    bank = [["regular", 1, 0.9, 0.0], ["cyclic_cos", 1, 0.9, 0.2617993877991494], ["regular", 24, 0.5, 0.0]]
    ablation = {
        mode: {"val_origins": o, "val_origins_mean": sum(o) / len(o), "test_mse": t}
        for mode, o, t in (
            ("rem", rem_origins, mse),
            ("both", both_origins, mse + 0.0001),
            ("softmax", [x + 0.1 for x in rem_origins], mse + 0.1),
            ("last", [x + 0.2 for x in rem_origins], mse + 0.11),
        )
    }
    report(
        tmp_path,
        data,
        "rsa",
        horizon,
        seed,
        mse,
        model_config={
            "input_length": 512,
            "horizon": horizon,
            "n_heads": 3,
            "d_model": 3,
            "rem_heads": [0, 0, 0, 0, 0, 0],
            "rem_bank": bank,
            "cycle_period": 24,
        },
        least_squares_reference={"test_mse": ls, "val_origins_mean": 0.7},
        readout_ablation=ablation,
        step0={"test_mse": mse, "val_mse": 0.6},
        wall_time_s=60 * minutes,
        best_epoch=0,
    )


ANCHORS = """
anchors:
  - {model: Good, paper: "Good (2025)", venue: X, source: "a table", dataset: ETTh1, input_length: 720,
     drop_last: false, input_length_choice: fixed, mse: {96: 0.350, 192: 0.390, 336: 0.410, 720: 0.440}}
  - {model: Long, paper: "Long (2024)", venue: Y, source: "a table", dataset: ETTh1, input_length: 720,
     drop_last: false, input_length_choice: fixed, mse: {720: 0.426}}
  - {model: Buggy, paper: "Buggy (2023)", venue: Z, source: "a table", dataset: ETTh1, input_length: 336,
     drop_last: true, input_length_choice: searched, mse: {96: 0.300, 192: 0.300, 336: 0.300, 720: 0.300}}
  - {model: H2, paper: "?", venue: null, source: "the review", dataset: ETTh2, input_length: null,
     drop_last: false, input_length_choice: "not recorded", mean: 0.334}
"""


def test_readout_sections_rank_bug_free_anchors_and_judge_the_issue_24_targets(tmp_path):
    from export.anchors import load_anchors

    ours = {96: 0.355, 192: 0.389, 336: 0.409, 720: 0.425}
    for h, mse in ours.items():
        for seed in (0, 1):
            readout_report(tmp_path, "ETTh1", h, seed, mse + 0.001 * seed, mse + 0.007, [0.6] * 4, [0.61] * 4)
    for h, mse in {96: 0.27, 192: 0.33, 336: 0.35, 720: 0.39}.items():
        readout_report(tmp_path, "ETTh2", h, 0, mse, mse + 0.01, [0.3] * 4, [0.3] * 4)
    (tmp_path / "anchors.yaml").write_text(ANCHORS)
    anchors = load_anchors(tmp_path / "anchors.yaml")
    page = render({}, long=collect(tmp_path, input_length=None), anchors=anchors)
    assert "## The shipped model: a REM read-out (L = 512)" in page and "## The first model (L = 96)" in page
    assert "| 96 | 0.3555 ± 0.0007 | 0.1777 ± 0.0004 | 0.3620 | -0.0065 | 0.6000 / 0.7000 | 2 | 2.0 |" in page
    assert "| mean | 0.3950 |" in page  # (0.3555 + 0.3895 + 0.4095 + 0.4255) / 4
    # ablations: each refitted read-out's rolling-origin validation / test
    assert (
        "| 96 | 0.6000 / 0.3555 | 0.6100 / 0.3556 | 0.7000 / 0.4555 | 0.8000 / 0.4655 | 0.7000 / 0.3620 |"
        in page
    )
    # anchors: the bug-free ones ranked, the best per horizon in bold, the buggy one apart
    assert "| 720 | 0.4255 | 0.440 | **0.426** | -0.0005 |" in page
    assert "| 96 | 0.3555 | **0.350** | — | +0.0055 |" in page
    assert "Listed apart, not ranked" in page and "Buggy 0.300 / 0.300 / 0.300 / 0.300" in page
    assert "| Buggy" not in page.split("Listed apart")[0].split("### ETTh1")[-1]
    assert "- ETTh1 mean ≤ 0.395: 0.3950 — met." in page
    assert "336: 0.4095 against 0.410 (Good), 720: 0.4255 against 0.426 (Long) — **missed**." in page
    assert (
        "- ETTh2 all four horizons, mean ≤ 0.334 (the best bug-free published mean): 0.3350 — **missed**."
        in page
    )


def sweep_row(variant, mode, horizon, seed, origins, test):
    from export.reports import SweepRow

    mean = sum(origins) / len(origins)
    return SweepRow(variant, horizon, seed, mode, [], 3, 3, 0.5, mean, origins, mean, test, 1.0)


def test_the_rule_needs_a_lower_mean_and_three_origins_of_four():
    def rows(*origins):
        return [sweep_row("v", "rem", 96, s, list(o), 0.0) for s, o in enumerate(origins)]

    ref = rows([1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0])
    assert beats(rows([0.9, 0.9, 0.9, 1.1], [0.9, 0.9, 0.9, 1.1]), ref)
    assert not beats(rows([0.9, 0.9, 1.1, 1.1], [0.9, 0.9, 1.0, 1.0]), ref)  # 2 of 4
    assert not beats(rows([0.99, 0.99, 0.99, 1.5], [0.99, 0.99, 0.99, 1.5]), ref)  # mean higher
    assert beats(rows([0.9, 0.9, 0.9, 0.9]), ref)  # compared over the seeds both have
    assert beats([], ref) is None


def test_training_against_step_0_counts_the_kept_starts(tmp_path):
    for seed, (epoch, test) in enumerate([(0, 0.36), (1, 0.362), (0, 0.361)]):
        report(
            tmp_path, "ETTh1", "rsa", 96, seed, test, model_config={"input_length": 512, "horizon": 96},
            step0={"val_mse": 0.66, "test_mse": 0.36 if epoch == 0 else 0.3605}, best_epoch=epoch,
        )  # fmt: skip
    report(tmp_path, "ETTh1", "baseline", 96, 0, 0.45, model_config={"input_length": 512, "horizon": 96})
    lines = training_table(collect(tmp_path, input_length=None))
    page = "\n".join(lines)
    assert "| ETTh1 | 96 | 0, 1, 0 | 0.6600 / 0.7220 | 0.3602 / 0.3610 | 0.4500 | — |" in page
    assert (
        "Step 0 was kept in 2 of 3 runs; where a trained epoch was kept, test MSE moved by +0.00150" in page
    )


def test_naive_references_beside_the_long_window_runs(tmp_path):
    """Computed from the run's data file on its own test windows: the numbers export/naive.py gives."""
    from export.data import load_dataset
    from export.naive import naive_references
    from export.results import naive_section

    config = {"input_length": 96, "horizon": 24, "cycle_period": 24}
    data = {"name": "ETTh1", "mode": "M", "path": "data/ETT/ETTh1.csv", "target": "OT"}
    for variant, mse in (("rsa", 0.3), ("baseline", 0.4)):
        report(tmp_path, "ETTh1", variant, 24, 0, mse, model_config=config)
        folder = tmp_path / f"ETTh1-{variant}-24-0"
        written = json.loads((folder / "report.json").read_text())
        (folder / "report.json").write_text(json.dumps({**written, "data": {**written["data"], **data}}))
    lines = naive_section(collect(tmp_path, input_length=None))
    ds = load_dataset("data/ETT/ETTh1.csv", 96, 24)
    naive = naive_references(ds, ds.test, 24)
    last, seasonal = naive.last_value.mse, naive.seasonal_naive.mse
    gain = 100 * (1 - 0.3 / min(last, seasonal))
    row = f"| ETTh1 | 24 | 96 | 0.300 | {last:.3f} | {seasonal:.3f} (P = 24) | {gain:.0f}% |"
    assert lines[0] == "## Naive references" and row in lines
    assert len([line for line in lines if line.startswith("| ETTh1")]) == 1  # the RSA runs only


def test_sweeps_mark_what_beats_the_reference_on_validation(tmp_path):
    spec = {
        "description": "banks",
        "reference": "small",
        "variants": {"small": {"modes": ["rem"]}, "big": {"modes": ["rem"]}, "odd": {"modes": ["rem"]}},
    }
    rows = []
    for name, origins, test in (
        ("small", [1.0] * 4, 0.36),
        ("big", [0.9] * 4, 0.35),
        ("odd", [0.9, 0.9, 1.1, 1.1], 0.30),
    ):
        rows += [sweep_row(name, "rem", 96, s, origins, test) for s in (0, 1)]
    from export.reports import SweepRun, read_report, write_report

    path = write_report(tmp_path / "s.json", SweepRun("s.yaml", spec, rows))  # as export.sweep writes it
    lines = sweep_section(read_report(path, SweepRun))
    page = "\n".join(lines)
    assert "| small | rem | 3 | 1.0000 / 0.3600 | reference |  |" in page
    assert "| big | rem | 3 | 0.9000 / 0.3500 | 96 | yes |" in page
    assert "| odd | rem | 3 | 1.0000 / 0.3000 | none |  |" in page  # its test is best; validation decides
    assert "Chosen: `big` (mode rem)." in page


def interval_report(version, coverage, channel, winkler, method="absolute"):
    rows = [
        {
            "level": level,
            "coverage": cov,
            "width": 1.0,
            "winkler": w,
            "coverage_by_channel": [cov - channel, cov + channel],
            "coverage_by_step": [cov],
            "width_by_step": [1.0],
            "by_request_horizon": {"96": {"coverage": cov, "width": 1.0, "winkler": w}},
        }
        for level, cov, w in zip((80.0, 90.0, 95.0), coverage, winkler, strict=True)
    ]
    from export.reports import IntervalEvaluation, build

    return build(IntervalEvaluation, {
        "model": "etth1-rsa", "version": version, "input_length": 512, "horizon": 96, "dataset": "ETTh1.csv",
        "served_method": method, "calibration": {"windows": 10}, "command": "x",
        "test": {"split": "test", "rows": [0, 10], "windows": 10}, "levels": [80.0, 90.0, 95.0],
        "units": "std", "scale_floor": 1e-6,
        "channels": ["a", "b"], "variants": {"served": rows},
        "plot": {"channel": "b", "windows": [0], "file": "p"},
        "folder": f"results/intervals/v{version}",
    })  # fmt: skip


def test_interval_targets_judge_the_latest_version_against_the_one_before():
    old = interval_report(4, (0.89, 0.943, 0.969), 0.09, (2.3, 3.1, 4.0))
    new = interval_report(5, (0.82, 0.91, 0.955), 0.05, (2.1, 2.7, 3.5), method="scaled")
    lines = shipped_interval_targets([old, new])
    assert lines[0].endswith("80%: +2.0, 90%: +1.0, 95%: +0.5 — met.")
    assert lines[1].endswith("80%: 7.0, 90%: 6.0, 95%: 5.5 — **missed**.")  # 82 + 5 = 87: 7 points off
    assert lines[2].endswith("95%: 3.500 against 4.000 — met.")
    page = "\n".join(interval_section([old, new]))
    assert "| etth1-rsa v5 | 512 | 96 | scaled | 82.0% | 91.0% | 95.5% | 7.0 / 6.0 / 5.5 |" in page


def test_competitions_are_judged_run_by_run_against_the_best_peer(tmp_path):
    """Each run of our model is judged on its own against the best statsforecast MASE of the data set
    (never the best of our runs), and a data set without peers gets its table and no verdict."""
    from export.results_competitions import competition_section, load_scores

    def row(data, model, mase):
        return {
            "data": data,
            "model": model,
            "series": 10,
            "smape": 1.0,
            "mase": mase,
            "mape": None,
            "fit_s": 1,
        }

    (tmp_path / "a.json").write_text(
        json.dumps(
            {
                "scores": [
                    row("M3 monthly", "REM read-out, global (L=72)", 0.90),
                    row("M3 yearly", "REM read-out, global (L=24)", 3.0),
                ]
            }
        )
    )
    (tmp_path / "b.json").write_text(
        json.dumps(
            {
                "scores": [
                    row("M3 monthly", "REM read-out, global (L=72)", 0.80),
                    row("M3 monthly", "AutoETS", 0.86),
                    row("M3 monthly", "AutoTheta", 0.85),
                ]
            }
        )
    )
    page = "\n".join(competition_section(load_scores(tmp_path)))
    assert "(AutoTheta, 0.8500): a.json: 0.9000, missed; b.json: 0.8000, met." in page
    assert "| AutoTheta | b.json | 1.00 | 0.850 | - | 1.0 |" in page
    assert "| REM read-out, global (L=72) | b.json | 1.00 | **0.800** | - | 1.0 |" in page
    assert "### M3 yearly (10 series)" in page and page.count("MASE at or below") == 1
    assert competition_section([]) == []


def test_coverage_per_series_group_is_shown_from_runs_that_measured_it(tmp_path):
    """A run of report schema 2 with coverage gets a row per (data set, group); a run of the first
    layout (none measured) adds none."""
    from export.reports import CompetitionData, CompetitionRun, CompetitionScore, GroupCoverage, write_report
    from export.results_competitions import competition_section, load_runs, load_scores

    score = CompetitionScore("M3 yearly", "REM read-out, global (L=24)", 9, 17.0, 3.0, None, 1.0, 0.1)
    groups = [
        GroupCoverage("history 14-17", 5, {"50": 0.4, "80": 0.75}),
        GroupCoverage("all", 9, {"50": 0.5}),
    ]
    measured = CompetitionData(
        horizon=6, coverage=groups, interval_note="intervals at [50.0, 80.0]; [90.0] need more"
    )
    write_report(tmp_path / "new.json", CompetitionRun(scores=[score], data={"M3 yearly": measured}))
    (tmp_path / "old.json").write_text(
        json.dumps({"scores": [dataclasses.asdict(score)], "M3 yearly": {"horizon": 6}})
    )
    # Another benchmark's run in its own layout shares the folder: left to its own reader.
    (tmp_path / "other.json").write_text(json.dumps({"data": "M3 monthly", "rows": [], "all": {"x": 1}}))
    assert [name for name, _ in load_runs(tmp_path)] == ["new.json", "old.json"]
    page = "\n".join(competition_section(load_scores(tmp_path), load_runs(tmp_path)))
    assert "| M3 yearly | new.json | history 14-17 (5) | 0.400 | 0.750 |" in page
    assert "| M3 yearly | new.json | all (9) | 0.500 | - |" in page and "old.json | history" not in page
    assert "- intervals at [50.0, 80.0]; [90.0] need more" in page


def test_the_benchmark_section_renders_from_the_run_json(tmp_path):
    """A benchmark run (report schema 3) is rendered from its JSON alone: the MASE and WQL tables with
    this run's models (ours first) and the published ones, the relative columns from its geometric
    means, validation beside test, this run's statsforecast against fev's; an earlier run follows."""
    from bench.competition_report import geomeans, published_scores
    from export.reports import (
        CompetitionCandidate,
        CompetitionData,
        CompetitionRun,
        CompetitionScore,
        write_report,
    )
    from export.results_competitions import competition_section, load_runs, load_scores

    def row(data, model, mase, wql):
        return CompetitionScore(data, model, 9, 10.0, mase, None, 1.0, 0.1, wql, 0.8)

    scores = [
        row("M3 monthly", "ours", 0.9, 0.09),
        row("M3 monthly", "SeasonalNaive", 1.2, 0.15),
        row("M3 other", "ours", 2.0, 0.04),
        row("M3 other", "SeasonalNaive", 2.5, 0.05),
    ]
    published = published_scores(["M3 monthly", "M3 other"])
    candidates = [
        CompetitionCandidate("L=24", 0.95, 0.93, False),
        CompetitionCandidate("L=72", 0.94, 0.9, True),
    ]
    run = CompetitionRun(
        scores=scores,
        data={"M3 monthly": CompetitionData(horizon=18, period=12, candidates=candidates)},
        command="python -m bench.competitions --data M3:monthly --data M3:other",
        ours="ours",
        protocol="this run's protocol",
        published_protocol="fev's protocol",
        published=published,
        geomean=geomeans(scores, published),
        total_s=120.0,
        machine="2 cores",
    )
    write_report(tmp_path / "benchmark.json", run)
    old = CompetitionScore("M3 monthly", "REM read-out, global (L=72)", 1428, 15.0, 0.94, None, 90.0)
    write_report(tmp_path / "monthly.json", CompetitionRun(scores=[old]))
    page = "\n".join(competition_section(load_scores(tmp_path), load_runs(tmp_path)))
    assert "| model | source | M3 monthly | M3 other | rel. SN, 2 sets | rel. SN, 1 fev task |" in page
    assert "| ours | this run | 0.900 | **2.000** | **0.775** | 0.750 |" in page  # sqrt(0.75 · 0.8)
    assert "| TiRex | published (fev) | 0.831 | - | - | 0.725 |" in page  # 0.8308 / 1.1462
    assert "| SeasonalNaive | this run | 0.0015" not in page and "| ours | this run | 0.0900 |" in page
    assert "| M3 monthly | L=24 0.950 / 0.930, **L=72 0.940 / 0.900** |" in page
    assert "| M3 monthly | SeasonalNaive | 1.200 | 1.146 | 0.1500 | 0.1485 |" in page
    assert "- **This run** (ours and statsforecast's models, fitted here): this run's protocol" in page
    assert "The whole command took 120 s (2.0 min) on 2 cores." in page
    assert "which leaves out M3 monthly (this run's SeasonalNaive MASE 1.200, fev's 1.146)." in page
    assert "### Earlier runs" in page and "#### M3 monthly (1,428 series)" in page
    assert "| REM read-out, global (L=72) | monthly.json | 15.00 | **0.940** | - | 90.0 |" in page


def test_the_results_page_holds_the_competitions_section_as_rendered_from_its_runs():
    """docs/results.md's competitions section is what `competition_section` renders from the runs under
    results/competitions/ (regenerate with `python -m export.results`)."""
    from pathlib import Path

    from export.results_competitions import competition_section, load_runs, load_scores

    root = Path(__file__).resolve().parents[2]
    folder = root / "results" / "competitions"
    section = competition_section(load_scores(folder), load_runs(folder))
    page = (root / "docs" / "results.md").read_text().split("\n")
    start = page.index(section[0])
    end = next(i for i in range(start + 1, len(page)) if page[i].startswith("## "))
    assert page[start:end] == section


def test_a_models_settings_are_written_as_a_reader_wants_them():
    """The candidates' settings line: a learned tilt's coefficients by their shape (model.json holds them),
    numbers to four figures, a short list as it is."""
    from export.results_competitions import _brief

    local = {"members": ["theta", "ces"], "weights": [0.5, 0.5], "tilt": {"coef": [[0.123456] * 5] * 8}}
    assert _brief(local) == "{members: [theta, ces], weights: [0.5, 0.5], tilt: {coef: (8 x 5 numbers)}}"
    assert (
        _brief([0.1] * 9) == "(9 numbers)"
        and _brief(2.0 / 3) == "0.6667"
        and _brief([[1], [2, 3]]) == "[[1], [2, 3]]"
    )
