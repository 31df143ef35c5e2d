"""The results page is computed from the reports, targets judged from the numbers."""

from __future__ import annotations

import json

from export.results import collect, render


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
    (d / "report.json").write_text(json.dumps(r))


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
    page = render({}, [*tuning, single])
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
    page = render({}, tuning)
    assert "round T: [96, 192, 336] (3 of 4)." in page
    assert "round U" not in page
    row = next(line for line in page.splitlines() if line.startswith("| T | 720 |"))
    assert row.endswith("| 0.5050 | 0.4950 | no/no |")


def long_report(tmp_path, data, variant, horizon, seed, mse, ls=None, gates0=None, minutes=5.0):
    report(
        tmp_path,
        data,
        variant,
        horizon,
        seed,
        mse,
        model_config={"input_length": 512, "horizon": horizon, "n_heads": 36},
        least_squares_reference={"test_mse": ls} if ls else None,
        step0={"test_mse": mse + 0.001, "val_mse": 0.6},
        ablation={"gates_zero": gates0, "rem_zero": gates0} if gates0 else None,
        wall_time_s=60 * minutes,
        best_epoch=0,
    )


def test_long_section_judges_the_issue_14_targets(tmp_path):
    rsa = {96: 0.358, 192: 0.393, 336: 0.41, 720: 0.43}
    for h, mse in rsa.items():
        for seed in (0, 1):
            long_report(tmp_path, "ETTh1", "rsa", h, seed, mse, ls=mse + 0.01, gates0=5.0, minutes=4 + seed)
        long_report(tmp_path, "ETTh1", "baseline", h, 0, mse + (0.03 if h != 720 else 0.01))
    long_report(tmp_path, "ETTh2", "rsa", 96, 0, 0.27, ls=0.26, gates0=3.0)
    long_report(tmp_path, "ETTh2", "baseline", 96, 0, 0.30)
    page = render({}, long=collect(tmp_path, input_length=None))
    assert "## The long-window RSA (L = 512)" in page and "## The first model (L = 96)" in page
    assert (
        "| 96 | 0.358 ± 0.000 | 0.179 ± 0.000 | 0.388 | -0.030 | 0.368 | 0.359 | 5.000 | 5.000 | 2/1 |"
        in page
    )
    assert "| 96 | 0.358 ± 0.000 | 0.372 | 0.374 | 0.370 |" in page  # against the published numbers
    assert "H = 96 MSE ≤ 0.360: 0.3580 — met" in page
    assert "Mean over 96/192/336/720 ≤ 0.400: 0.3977 — met" in page
    assert (
        "ETTh1: RSA below its baseline by ≥ 0.02 at every horizon: 96: 0.030, 192: 0.030, 336: 0.030, "
        in page
    )
    assert "720: 0.010 — **missed**" in page
    assert (
        "ETTh1: RSA below full least squares at the same L: 96: yes, 192: yes, 336: yes, 720: yes — met"
        in page
    )
    assert "ETTh2: RSA below full least squares at the same L: 96: no — **missed**" in page
    assert "slowest 5.0 min" in page and "— met." in page


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
        (folder / "report.json").write_text(json.dumps({**written, "data": data}))
    lines = naive_section(collect(tmp_path, input_length=None))
    ds = load_dataset("data/ETT/ETTh1.csv", 96, 24)
    naive = naive_references(ds, ds.test, 24)
    last, seasonal = naive["last_value"]["mse"], naive["seasonal_naive"]["mse"]
    gain = 100 * (1 - 0.3 / min(last, seasonal))
    row = f"| ETTh1 | 24 | 96 | 0.300 | {last:.3f} | {seasonal:.3f} (P = 24) | {gain:.0f}% |"
    assert lines[0] == "## Naive references" and row in lines
    assert len([line for line in lines if line.startswith("| ETTh1")]) == 1  # the RSA runs only
