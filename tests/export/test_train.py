"""Training on a slice of ETTh1: the loss falls, the report is complete, a seed repeats itself."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open

from export.checkpoint import load_checkpoint
from export.evaluate import evaluate, load_for_checkpoint
from export.paths import REPO_ROOT as ROOT
from export.train import TrainConfig, TrainingError, load_config, prepare, train, untrained
from tests.utils.data import ettd_slice

TINY = {
    "input_length": 24,
    "horizon": 12,
    "d_model": 8,
    "d_ff": 16,
    "n_heads": 2,
    "rem_heads": (1, 1, 0, 0, 0, 0),
}


@pytest.fixture(scope="module")
def slice_csv(tmp_path_factory):
    return ettd_slice(tmp_path_factory.mktemp("data") / "etth1_slice.csv", rows=1200)


def tiny_config(csv, out, **kw) -> TrainConfig:
    return TrainConfig(
        data=str(csv),
        model=dict(TINY),
        epochs=3,
        batch_size=32,
        lr=3e-3,
        out=str(out),
        threads=1,
        progress=False,
        **kw,
    )


@pytest.fixture(scope="module")
def run(slice_csv, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    return train(tiny_config(slice_csv, out, name="a"))


def test_loss_falls_and_report_is_complete(run):
    report = json.loads((run / "report.json").read_text())
    losses = [e["train_loss"] for e in report["epochs"]]
    assert losses[-1] < losses[0]
    for key in (
        "config",
        "model_config",
        "epochs",
        "test",
        "wall_time_s",
        "seconds_per_epoch",
        "seed",
        "data",
        "recurrence",
        "best_epoch",
    ):
        assert key in report, key
    assert report["data"]["sha256"] and len(report["data"]["sha256"]) == 64
    assert report["data"]["protocol"] == "ratio-70-10-20"
    assert set(report["test"]) == {"mse", "mae"} and report["test"]["mse"] > 0
    for e in report["epochs"]:
        assert set(e) >= {"epoch", "train_loss", "val_mse", "val_mae", "seconds"}
    heads = report["recurrence"][0]["heads"]
    assert [h["kind"] for h in heads] == ["regular", "cyclic_cos"]
    assert heads[0]["lambda"] is not None and heads[1]["gamma"] is not None and heads[1]["theta"] is not None
    assert 0 < heads[0]["gate"] < 1
    png = (run / "forecast.png").read_bytes()
    assert png.startswith(b"\x89PNG")


def test_checkpoint_is_safetensors_and_evaluates_to_the_report(run):
    path = run / "checkpoint.safetensors"
    with safe_open(str(path), framework="pt") as f:
        assert "rsa" in f.metadata()
    model, info = load_checkpoint(path)
    ds = load_for_checkpoint(info)
    metrics = evaluate(model, ds.test, batch_size=7)  # an odd batch size: the last batch is partial
    report = json.loads((run / "report.json").read_text())
    assert metrics["windows"] == ds.test.num_windows == report["windows"]["test"]
    assert metrics["mse"] == pytest.approx(report["test"]["mse"], rel=1e-5)
    assert metrics["mae"] == pytest.approx(report["test"]["mae"], rel=1e-5)


def test_same_seed_same_result(slice_csv, run, tmp_path):
    again = train(tiny_config(slice_csv, tmp_path, name="a"))
    a = json.loads((run / "report.json").read_text())
    b = json.loads((again / "report.json").read_text())
    assert [e["train_loss"] for e in a["epochs"]] == [e["train_loss"] for e in b["epochs"]]
    assert a["test"] == b["test"]


def test_baseline_variant_has_no_rem(slice_csv, tmp_path):
    cfg = tiny_config(slice_csv, tmp_path, variant="baseline")
    cfg.epochs = 1
    report = json.loads((train(cfg) / "report.json").read_text())
    assert report["model_config"]["rem_heads"] == [0, 0, 0, 0, 0, 0]
    assert report["model_config"]["positional"] == "learned"
    assert all(h["kind"] == "softmax" and h["gate"] == 0 for h in report["recurrence"][0]["heads"])


def test_config_file_and_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("epochs: 2\nmodel:\n  horizon: 48\n")
    cfg = load_config(f, ["model.d_model=16", "seed=3", "variant=baseline"])
    assert (cfg.epochs, cfg.horizon, cfg.model["d_model"], cfg.seed, cfg.variant) == (
        2,
        48,
        16,
        3,
        "baseline",
    )
    with pytest.raises(ValueError, match="unknown settings"):
        load_config(None, ["epoch=2"])
    with pytest.raises(ValueError, match="unknown model settings"):
        load_config(None, ["model.dmodel=2"])
    with pytest.raises(ValueError, match="variant"):
        load_config(None, ["variant=informer"])
    with pytest.raises(ValueError, match="0 with select_step0"):  # no training and nothing to keep
        load_config(None, ["epochs=0"])
    with pytest.raises(ValueError, match="readout_ablation needs a model read at its last step"):
        load_config(None, ["readout_ablation=true"])


def test_cli_reports_a_bad_csv_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.csv"
    rows = ["date,a,b"] + [f"2020-01-01 {h:02d}:00:00,{h},{h}" for h in range(24)]
    rows[5] = "2020-01-01 04:00:00,1,oops"
    bad.write_text("\n".join(rows) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "export.train", "--data", str(bad), "--quiet", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "line 6" in proc.stderr and "'b'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "setting, message",
    [
        ("model.n_heads=5", "d_model (36) must be divisible by n_heads (5)"),
        ("model.rem_bank.regular=[1.5]", "rem_bank[0]: λ must be in (-1, 1), got 1.5"),
    ],
)
def test_cli_reports_bad_model_settings_without_a_traceback(slice_csv, tmp_path, setting, message):
    """Settings only a whole model config can judge (here the trained REM read-out's 36 heads of width 36)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "export.train",
            str(ROOT / "configs" / "etth1-rem-readout-trained.yaml"),
            "--data",
            str(slice_csv),
            "--set",
            setting,
            "--set",
            "model.input_length=48",
            "--quiet",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"error: model settings: {message}" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "setting, message",
    [
        ("model.n_heads=5", "heads; n_heads is 5"),
        ("model.rem_bank=[]", "model.n_heads: auto needs model.rem_bank"),
    ],
)
def test_a_bank_sizes_its_heads(slice_csv, setting, message):
    """`n_heads: auto` counts the bank's heads and `d_model: auto` gives each one dimension."""
    base = [f"data={slice_csv}", "model.input_length=48", "model.horizon=12"]
    cfg, ds, _ = prepare(load_config(ROOT / "configs" / "etth1-rem-readout.yaml", base))
    model = untrained(cfg, ds)
    assert model.cfg.n_heads == model.cfg.d_model == len(cfg.model["rem_bank"]) > 30
    with pytest.raises(TrainingError, match=message):
        prepare(load_config(ROOT / "configs" / "etth1-rem-readout.yaml", [*base, setting]))


def test_evaluate_command_prints_the_report_metrics(run):
    proc = subprocess.run(
        [sys.executable, "-m", "export.evaluate", str(run / "checkpoint.safetensors")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    report = json.loads((run / "report.json").read_text())
    assert out["split"] == "test" and out["windows"] == report["windows"]["test"]
    assert out["mse"] == pytest.approx(report["test"]["mse"], rel=1e-5)


@pytest.mark.parametrize(
    "config",
    ["etth1-rsa.yaml", "etth1-transformer.yaml", "etth1-rem-readout.yaml", "etth1-rem-readout-trained.yaml"],
)
def test_shipped_configs_train(config, slice_csv, tmp_path):
    """Each shipped config runs as written (one short epoch on a slice, shorter windows)."""
    overrides = [
        f"data={slice_csv}",
        f"out={tmp_path}",
        "epochs=1" if config != "etth1-rem-readout.yaml" else "epochs=0",
        "max_train_windows=64",
        "model.input_length=48",
        "model.horizon=24",
        "threads=1",
        "progress=false",
    ]
    cfg = load_config(ROOT / "configs" / config, overrides)
    report = json.loads((train(cfg) / "report.json").read_text())
    m = report["model_config"]
    assert m["cycle_period"] == 24  # "auto" read the daily period off the slice
    if config.startswith("etth1-rem-readout"):  # a bank of REM heads read at the last step, least squares
        assert (m["head"], m["n_heads"], m["d_model"]) == ("state", len(m["rem_bank"]), len(m["rem_bank"]))
        assert m["linear_residual"] is False and {r[1] for r in m["rem_bank"]} == {1, 24}  # dilated: days
        assert report["readout_fit"] and report["step0"] and report["least_squares_reference"]["val_origins"]
        if config == "etth1-rem-readout.yaml":  # nothing trained: the result is the least-squares start
            assert report["epochs"] == [] and report["best_epoch"] == 0
            assert report["test"]["mse"] == pytest.approx(report["step0"]["test_mse"])
            ablation = report["readout_ablation"]
            assert set(ablation) == {"rem", "both", "softmax", "last"}
            # The gates are 1: the model is its REM half, the read-out as refitted on it.
            assert ablation["rem"]["val_mse"] == pytest.approx(report["step0"]["val_mse"], rel=1e-4)
        return
    assert m["rem_heads"] == [2, 1, 1, 0, 0, 0] and m["masked"]
    if config == "etth1-transformer.yaml":
        assert (m["linear_residual"], m["head"], report["linear_fit"]) == (False, "last", None)
    else:
        assert (m["linear_residual"], m["head"]) == (True, "flatten")
        assert report["linear_fit"]["val_mse"] > 0


def test_a_spreadsheet_export_trains_with_the_flags_that_answer_its_quirks(tmp_path):
    """The your-own-data dead ends, in one file: ';' and decimal commas, the timestamp not first and
    with UTC offsets, a text column, gaps; each answered by a flag, and the run says what it did."""
    import numpy as np
    import pandas as pd

    stamps = pd.date_range("2022-01-01", periods=400, freq="h", tz="Europe/Madrid")
    load = 900 + 100 * np.sin(np.arange(400) * 2 * np.pi / 24)
    lines = ["site;load_mw;when;temp_c"]
    for i, t in enumerate(stamps):
        mw = "" if i in (50, 51, 300) else f"{load[i]:.1f}".replace(".", ",")
        lines.append(f"north;{mw};{t.isoformat()};{10 + i % 7},5")
    csv = tmp_path / "grid.csv"
    csv.write_text("\n".join(lines) + "\n")

    def train_cli(*flags):
        return subprocess.run(
            [sys.executable, "-m", "export.train", "--data", str(csv), "--out", str(tmp_path / "runs"),
             "--quiet", "--input-length", "24", "--horizon", "12", "--epochs", "1", "--set", "threads=1",
             *flags],
            capture_output=True, text=True, timeout=300, cwd=ROOT,
        )  # fmt: skip

    # Without a timestamp column nothing else can be read: that refusal comes alone, naming its flag.
    refused = train_cli()
    assert refused.returncode == 2 and "--timestamp-column" in refused.stderr, refused.stderr
    # Then every other problem of the file in one run: the text column, the gaps, and (mode S) the target.
    refused = train_cli("--timestamp-column", "when", "--mode", "S")
    assert refused.returncode == 2, refused.stderr
    for flag in ("--drop site", "--fill linear", "--target"):
        assert flag in refused.stderr, (flag, refused.stderr)
    assert refused.stderr.count("\nalso: ") == 2, refused.stderr
    # Mode M forecasts every column: no target is asked for.
    proc = train_cli("--timestamp-column", "when", "--drop", "site", "--fill", "linear", "--name", "grid")
    assert proc.returncode == 0, proc.stderr
    for note in ("delimiter ';' detected", "decimal commas", "3 missing value(s) filled (linear)", "UTC"):
        assert note in proc.stdout, proc.stdout
    report = json.loads((tmp_path / "runs" / "grid" / "report.json").read_text())
    assert report["data"]["channels"] == ["load_mw", "temp_c"] and report["data"]["fill"] == "linear"
    assert report["data"]["target"] == "load_mw"  # mode M: the first column, the one the plot shows
    assert report["data"]["drop"] == ["site"] and len(report["data"]["notes"]) == 4

    # Evaluated on a file without one of its columns: which file it was trained on, what it needs.
    other = tmp_path / "other.csv"
    other.write_text(
        "when,load_mw\n" + "\n".join(f"{t.isoformat()},{900 + i}" for i, t in enumerate(stamps)) + "\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "export.evaluate", str(tmp_path / "runs" / "grid" / "checkpoint.safetensors"),
         "--data", str(other)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout
    assert "trained on" in proc.stderr and "['load_mw', 'temp_c']" in proc.stderr, proc.stderr


def test_the_report_keeps_naive_references_units_windows_and_why_its_model_was_kept(run):
    report = json.loads((run / "report.json").read_text())
    _, info = load_checkpoint(run / "checkpoint.safetensors")
    ds = load_for_checkpoint(info)
    x, y = ds.test.windows(torch.arange(ds.test.num_windows))
    last = float(((x[:, -1:, :] - y) ** 2).mean())
    assert report["naive"]["last_value"]["mse"] == pytest.approx(last, rel=1e-5)
    assert report["naive"]["seasonal_naive"]["period"] >= 2
    assert report["naive"]["windows"] == report["windows"]["test"] == ds.test.num_windows
    assert report["units"].startswith("MSE and MAE on standardised values")
    assert report["windows"]["val"] == ds.val.num_windows
    assert report["selection"].startswith(f"kept epoch {report['best_epoch']} of {len(report['epochs'])}")
    assert report["calibration"].startswith("intervals at levels")


def test_a_log_gets_one_plain_line_per_epoch_and_the_summary_says_what_was_kept(slice_csv, tmp_path):
    """stderr is a pipe here, as in a log file: no progress bars (their escape codes), one line per epoch;
    no config given: the own-data recipe, said on the first line, keeps step 0 or an epoch, and says
    which, with the test MSE's units and the naive references beside it."""
    proc = subprocess.run(
        [sys.executable, "-m", "export.train", "--data", str(slice_csv), "--out", str(tmp_path),
         "--input-length", "48", "--horizon", "12", "--epochs", "2", "--set", "threads=1", "--name", "log"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("log: windows of L = 48 in, H = 12 out: train ")
    assert lines[1].startswith("log: step 0 (before training, a candidate): val MSE ")
    assert [line.split(":")[1].strip() for line in lines[2:]] == ["epoch 1/2", "epoch 2/2"][: len(lines) - 2]
    out = proc.stdout
    assert out.startswith("config: configs/own-data.yaml (none given); which config: your own data: none")
    assert "(standardised: each channel minus its training mean, over its training std)" in out
    assert "naive references on the same " in out and "seasonal naive (period 24)" in out
    report = json.loads((tmp_path / "log" / "report.json").read_text())
    kept = "kept step 0, the network before any gradient step" if report["best_epoch"] == 0 else "kept epoch"
    assert f"  {kept}" in out and report["selection"].startswith(kept.strip())


def test_input_length_auto_keeps_the_best_least_squares_start_on_validation(tmp_path):
    """The own-data recipe's window: 96, 192, 336 or 512, whichever start scores the lowest validation
    MSE; a length the file cannot hold is said, not tried."""
    csv = ettd_slice(tmp_path / "slice.csv", rows=700)  # 490 training rows: 512 + 24 do not fit
    overrides = [f"data={csv}", f"out={tmp_path}", "epochs=1", "max_train_windows=32", "model.horizon=24"]
    cfg = load_config(ROOT / "configs" / "own-data.yaml", [*overrides, "threads=1", "progress=false"])
    report = json.loads((train(cfg) / "report.json").read_text())
    search = report["input_length_search"]
    scores = {k: v for k, v in search["validation_mse"].items() if isinstance(v, float)}
    assert set(scores) == {"96", "192", "336"} and search["validation_mse"]["512"] == "too long for the file"
    assert search["chosen"] == int(min(scores, key=scores.get)) == report["model_config"]["input_length"]
    if report["best_epoch"] == 0:  # the kept start is the one the search scored
        assert report["val"]["mse"] == pytest.approx(scores[str(search["chosen"])], rel=1e-6)


def test_cyclic_heads_start_at_the_data_s_season_unless_told(tmp_path):
    """theta_init left unset follows the detected cycle (2π/7 for a weekly one), not 2π/24."""
    import math

    import numpy as np
    import pandas as pd

    from export.data import load_dataset
    from export.train import resolve_auto

    days = pd.date_range("2021-01-01", periods=300, freq="D")
    values = np.tile([1.0, 2.0, 0.5, 3.0, 1.5, 4.0, 0.0], 50)[:300]
    csv = tmp_path / "weekly.csv"
    csv.write_text(
        "date,v\n" + "\n".join(f"{t.date()},{v}" for t, v in zip(days, values, strict=True)) + "\n"
    )
    ds = load_dataset(csv, 28, 7)
    shape = {"input_length": 28, "horizon": 7, "rem_heads": [1, 1, 1, 0, 0, 0], "cycle_period": "auto"}
    model = resolve_auto(TrainConfig(data=str(csv), model=shape), ds).model
    assert model["cycle_period"] == 7 and model["theta_init"] == pytest.approx(2 * math.pi / 7)
    told = resolve_auto(TrainConfig(data=str(csv), model={**shape, "theta_init": 0.5}), ds).model
    assert told["theta_init"] == 0.5
