"""Tests for export/global_models/ (model.py, search.py): the global REM read-out over many series."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from app.artifacts.readout import series_windows
from app.inference.metrics import mase, smape
from export.global_models.cli import cli
from export.global_models.config import PanelConfig, rem_kernels
from export.global_models.model import GlobalModel, fit_global
from export.global_models.search import LENGTH_TOLERANCE, train_global

PERIOD, H = 12, 6


def seasonal_panel(n: int, seed: int, lengths: tuple[int, int] = (40, 120)) -> list[np.ndarray]:
    """Monthly-like series: level × (1 + seasonal shape + trend) + noise, each its own scale and length."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        length = int(rng.integers(*lengths))
        t = np.arange(length)
        shape = 0.3 * np.sin(2 * np.pi * t / PERIOD + rng.uniform(0, 2 * np.pi))
        level = rng.uniform(10, 5000)
        trend = rng.normal(0, 0.004) * t
        out.append(level * (1 + shape + trend) + level * 0.03 * rng.normal(size=length))
    return out


def split(series: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    return [s[:-H] for s in series], np.array([s[-H:] for s in series])


CFG = PanelConfig(horizon=H, period=PERIOD, input_periods=2, irls=1)


def test_windows_mask_the_missing_start_and_need_min_history() -> None:
    v = np.arange(1.0, 11.0)  # 10 values
    x, m, t = series_windows(v, length=6, horizon=2, history=3)
    assert len(x) == 10 - 2 - 3 + 1  # inputs end after 3..8 values
    np.testing.assert_array_equal(x[0], [0, 0, 0, 1, 2, 3])  # zeros where the series had not begun
    np.testing.assert_array_equal(m[0], [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(t[0], [4, 5])
    np.testing.assert_array_equal(x[-1], [3, 4, 5, 6, 7, 8])
    assert series_windows(v[:4], length=6, horizon=2, history=3) is None


def test_kernels_are_the_rem_last_rows() -> None:
    k = rem_kernels({"regular": [0.5]}, PERIOD, 5)
    expected = np.array([0.5**4, 0.5**3, 0.5**2, 0.5, 0.0])  # lag 0 excluded, as models/rem.lag_row
    np.testing.assert_allclose(k[0], expected / np.linalg.norm(expected))


def test_forecasts_scale_with_the_series() -> None:
    train, _ = split(seasonal_panel(60, seed=0))
    model = fit_global(train, CFG, 24)
    histories = train[:5]
    np.testing.assert_allclose(
        model.forecast([1000 * h for h in histories]), 1000 * model.forecast(histories), rtol=1e-9
    )


def test_the_fit_does_not_depend_on_the_order_of_the_series() -> None:
    train, _ = split(seasonal_panel(40, seed=1))
    a = fit_global(train, CFG, 24)
    b = fit_global(train[::-1], CFG, 24)
    np.testing.assert_allclose(a.forecast(train), b.forecast(train), rtol=1e-6)  # sums in another order


def test_unseen_series_are_forecast_as_well_as_seen_ones() -> None:
    seen, unseen = seasonal_panel(150, seed=2), seasonal_panel(150, seed=3)
    train, actual = split(seen)
    model = fit_global(train, CFG, 24)
    new_train, new_actual = split(unseen)
    on_seen = mase(train, actual, model.forecast(train), PERIOD).mean()
    on_unseen = mase(new_train, new_actual, model.forecast(new_train), PERIOD).mean()
    naive = np.array([np.resize(h[-PERIOD:], H) for h in new_train])  # the seasonal naive forecast
    assert on_unseen < 0.8 * mase(new_train, new_actual, naive, PERIOD).mean()
    assert abs(on_unseen - on_seen) < 0.15 * on_seen


def test_short_histories_forecast_down_to_min_history() -> None:
    train, _ = split(seasonal_panel(40, seed=4))
    model = fit_global(train, CFG, 24)
    assert model.min_history == PERIOD
    short = [train[0][-PERIOD:], train[1][-PERIOD - 3 :]]
    assert np.isfinite(model.forecast(short)).all()
    with pytest.raises(ValueError, match="fewer than min_history = 12"):
        model.forecast([train[0][-5:]])


def test_a_lone_short_series_trains_on_windows_of_fewer_observed_values() -> None:
    """A series shorter than train_min + 2H (50 monthly values at H 18, as 340 lone M3 monthly series) had
    no training window before validation's origin and was refused, naming 24 + 18 values it had: its
    windows now need what it leaves there (50 − 2·18 = 14 observed values, at least min_history); one too
    short for that is refused with what it needs and the longest horizon that fits."""
    cfg = PanelConfig(horizon=18, period=PERIOD)
    v = seasonal_panel(1, seed=3, lengths=(50, 51))[0]
    assert cfg.train_min == 24 and cfg.fitted_to([v]).train_history == 14
    assert cfg.fitted_to([v, np.ones(60)]) is cfg  # one series holds the default's windows: as before
    given = dataclasses.replace(cfg, train_history=30)
    assert given.fitted_to([v]) is given  # a train_history given is kept
    with pytest.raises(ValueError, match=r"has 40 values: .* = 12 \+ 2 × 18 = 48 .*a horizon of at most 14,"):
        cfg.fitted_to([v[:40]])  # the transformer's rule: it needs validation
    model = train_global([v], cfg, "1MS", local=True)
    assert model.config.train_history == 14  # saved: the exporter's calibration and refits read the same
    assert np.isfinite(model.forecast([v])).all()


def test_a_series_too_short_to_validate_trains_on_fixed_choices() -> None:
    """Shorter than min_history + 2H (40 monthly values at H 18, as 43 of 200 lone M1 monthly series): no
    validation can be held out, so the read-out trains on the one window the series holds (40 − 18 = 22
    observed values and the 18 after them) with fixed choices, and says so; no interval (nothing is left
    to calibrate on). Shorter than min_history + H is refused naming what is needed; so is a covariate
    model, judged on validation."""
    from export.covariates import CovariatePlan, CovariateSeries
    from export.global_models.hybrid import widest_local
    from export.global_models.onnx import calibrate_global
    from export.global_models.search import summary_lines

    cfg = PanelConfig(horizon=18, period=PERIOD)
    v = seasonal_panel(1, seed=3, lengths=(40, 41))[0]
    assert cfg.fitted_to([v], unvalidated=True).train_history == 22
    assert not cfg.fitted_to([v], unvalidated=True).validates([v])
    assert cfg.fitted_to([np.ones(50)], unvalidated=True).validates([np.ones(50)])  # the rule before
    model = train_global([v], cfg, "1MS", local=True)
    assert model.config.train_history == 22 and model.config.lift == 0 and model.input_length == 72
    assert model.local == widest_local(PERIOD, 18) and model.search == {"origins": 0.0}
    point = model.forecast([v])
    assert point.shape == (1, 18) and np.isfinite(point).all()
    readout = train_global([v], cfg, "1MS")
    assert readout.local is None and not np.allclose(readout.forecast([v]), point)
    [said] = summary_lines(model)
    assert said.startswith("not validated: no series holds train_history + 2 × horizon = 22 + 2 × 18 values")
    intervals, why = calibrate_global(model, [v])
    assert intervals is None and why == (
        "no interval: no series leaves train_history + horizon = 22 + 18 values to fit on before its "
        "calibration tail"
    )
    with pytest.raises(ValueError, match=r"has 29 values: .* = 12 \+ 18 = 30 .*a horizon of at most 17,"):
        train_global([v[:29]], cfg, "1MS", local=True)
    stamps = pd.date_range("2020-01-01", periods=40, freq="MS").to_numpy()
    item = CovariateSeries("a", v, stamps, future={"price": np.arange(40.0)})
    with pytest.raises(ValueError, match="a covariate model is judged on validation"):
        train_global([item], cfg, "1MS", plan=CovariatePlan(future=("price",)))


def test_few_series_are_validated_at_more_origins() -> None:
    """Rolling origins for few series (export/global_models/hybrid.py SEARCH_WINDOWS): a panel keeps its
    two, one series takes up to ten, each H//2 further back while a training window remains before it."""
    from export.global_models.hybrid import search_origins
    from export.global_models.search import summary_lines

    assert [search_origins(n) for n in (1, 2, 3, 5, 8, 10, 100)] == [10, 10, 7, 4, 3, 2, 2]
    cfg = PanelConfig(horizon=H, period=PERIOD, irls=0)
    long, short = (
        seasonal_panel(2, seed=11, lengths=(120, 121))[0],
        seasonal_panel(1, seed=12, lengths=(45, 46))[0],
    )
    assert train_global([long], cfg).search["origins"] == 10  # 120 values hold windows before all ten
    # 45 values: origin j holds out 6 + 3j and needs 24 + 6 before it, so j <= 3 (four origins)
    model = train_global([short], cfg)
    assert model.search["origins"] == 4
    one = train_global([short[:37]], cfg)  # 37 values: one origin (6 + 3 more would leave 28 < 24 + 6)
    assert one.search["origins"] == 1
    assert "on the same origin (each series' last H values held out)" in summary_lines(one)[0]
    assert (
        "on the same 4 origins (each series' last H, H + H//2, ... H + 3·(H//2) values held out)"
        in (summary_lines(model)[0])
    )


def test_few_series_take_the_widest_local_half_on_the_longest_window() -> None:
    """Fewer than ten series: no search of member sets and windows (export/global_models/hybrid.py
    `fixed_local`); ten or more: searched as before."""
    from export.global_models.hybrid import LOCAL_PERIODS, candidate_sets, few_series

    assert few_series(1) and few_series(9) and not few_series(10)
    cfg = PanelConfig(horizon=H, period=PERIOD, irls=0)
    widest = max(candidate_sets(PERIOD), key=len)
    fixed = f"local_{'+'.join(widest)}_{max(LOCAL_PERIODS) * PERIOD}"
    t = np.arange(120)
    walk = 100 + np.cumsum(np.random.default_rng(0).normal(0, 3, 120)) + 10 * np.sin(2 * np.pi * t / 12)
    smooth = seasonal_panel(1, seed=13, lengths=(120, 121))[0]
    chose = []
    # a seasonal random walk the hybrid wins; a smooth season the read-out wins on validation, but
    # fitted on fewer windows than READOUT_WINDOWS_PER_FEATURE per feature it is not trusted alone;
    # 3,000 values of it are enough
    for v in (walk, smooth, seasonal_panel(1, seed=13, lengths=(3000, 3001))[0]):
        model = train_global([v], cfg, local=True)
        chose.append(model.local is not None)
        assert {k for k in model.search if k.startswith("local_")} == {fixed}  # nothing else was tried
        if model.local is not None:
            assert model.local.tilt is None
            assert (model.local.members, model.local.length) == (widest, max(LOCAL_PERIODS) * PERIOD)
        else:  # the read-out alone, where it validates better on the mean and at most origins
            assert model.search["global"] < model.search[fixed]
    assert chose == [True, True, False]


def test_the_input_length_is_searched_in_periods_on_validation() -> None:
    series = seasonal_panel(50, seed=5)
    cfg = PanelConfig(horizon=H, period=PERIOD, irls=0)
    model = train_global(series, cfg)
    lengths = {k: v for k, v in model.search.items() if k.isdigit()}
    assert set(model.search) == {"12", "24", "36", "48", "72", "model", "seasonal_naive", "origins"}
    assert model.search["origins"] == 2  # 50 series: the two origins of a panel
    low = min(lengths.values())
    near = [int(k) for k, v in lengths.items() if v <= low * (1 + LENGTH_TOLERANCE)]
    assert model.input_length == max(near)  # the longest within the tolerance of the best
    assert len(near) > 1  # on this panel the rule chooses (36 validates best, 48 is within 1%)
    assert model.search["model"] == lengths[str(model.input_length)]


def test_train_prints_the_validation_mase_beside_the_seasonal_naives_on_the_same_origins(
    tmp_path: Path,
) -> None:
    """Issue 45, item 5: the seasonal naive scored by hand on export/global_models/hybrid.py's validation
    origins (each series' last H, then H + H//2 values held out; each step the value a season before it)."""
    from export.global_models.hybrid import origins
    from export.global_models.search import summary_lines

    series = seasonal_panel(30, seed=9, lengths=(40, 60))
    cfg = PanelConfig(horizon=H, period=PERIOD, irls=0)
    model = train_global(series, cfg)
    naive = []
    for o in origins(series, H, cfg.history, cfg.train_min, lambda v, k: v[:-k]):
        fc = np.array([np.resize(p[-PERIOD:], H) for p in o.fit_part])  # H = 6 <= one season
        scores = mase(o.fit_part, o.held, fc, PERIOD)
        naive.append(scores[o.scored].mean())
    assert model.search["seasonal_naive"] == pytest.approx(np.mean(naive), rel=1e-12)
    first, table = summary_lines(model)
    assert first.startswith(
        f"validation MASE {model.search['model']:.4f} (the read-out), seasonal naive {np.mean(naive):.4f} on "
        "the same origins"
    )
    assert table.startswith("input length searched (validation MASE of the read-out): 12: ")
    assert f"{model.input_length}: {model.search[str(model.input_length)]:.4f} (chosen)" in table
    assert table.endswith("; the longest within 1% of the lowest is chosen")  # not always the lowest printed
    assert "WORSE THAN THE SEASONAL NAIVE" not in first  # 0.5 of the naive's or so here
    worse = dataclasses.replace(model, search={**model.search, "model": 1.5 * model.search["seasonal_naive"]})
    assert summary_lines(worse)[0].endswith(
        "1.500 of the naive's: WORSE THAN THE SEASONAL NAIVE (check the cycle, --period, and the input "
        "length, --input-periods; the naive repeats the last cycle)"
    )


def test_the_summary_says_the_local_models_were_searched_and_lost() -> None:
    """A read-out served alone although the local half was searched: the best set and window and both
    validation scores, so that the user sees it was tried (fpp2's gasoline: dotm and damped on 416 weeks
    0.8645, the read-out alone 0.8547)."""
    from export.global_models.search import summary_lines

    model = fit_global(split(seasonal_panel(30, seed=6))[0], CFG, 24)
    search = {"global": 0.8547, "local_theta+damped_104": 1.188, "local_dotm+damped_416": 0.8645}
    lines = summary_lines(dataclasses.replace(model, search=search, local=None))
    assert lines == [
        "local models searched (validation MASE of the hybrid, 2 sets and windows): the best, dotm, damped "
        "on the last 416 values, 0.8645; not kept: the read-out alone validates 0.8547"
    ]


def test_save_and_load(tmp_path: Path) -> None:
    train, _ = split(seasonal_panel(30, seed=6))
    model = fit_global(train, CFG, 24)
    loaded = GlobalModel.load(model.save(tmp_path / "model.json"))
    np.testing.assert_allclose(loaded.forecast(train[:3]), model.forecast(train[:3]))
    assert loaded.min_history == model.min_history and loaded.config == model.config


def test_metrics() -> None:
    actual, forecast = np.array([[100.0, 200.0]]), np.array([[110.0, 180.0]])
    np.testing.assert_allclose(smape(actual, forecast), [(200 * 10 / 210 + 200 * 20 / 380) / 2])
    insample = [np.array([1.0, 3.0, 2.0, 6.0])]  # naive (period 1) errors 2, 1, 4: scale 7/3
    np.testing.assert_allclose(mase(insample, actual, forecast, 1), [15 / (7 / 3)])


def test_cli_trains_on_a_long_file_and_forecasts_unseen_series(tmp_path: Path) -> None:
    def long_file(series: list[np.ndarray], name: str, prefix: str) -> Path:
        rows = []
        for i, s in enumerate(series):
            stamps = pd.date_range("2000-01-01", periods=len(s), freq="MS")
            rows += [(f"{prefix}{i}", str(t.date()), float(v)) for t, v in zip(stamps, s, strict=True)]
        path = tmp_path / name
        pd.DataFrame(rows, columns=["unique_id", "ds", "y"]).to_csv(path, index=False)
        return path

    runner = CliRunner()
    train_file = long_file(seasonal_panel(30, seed=7, lengths=(40, 60)), "train.csv", "store_")
    result = runner.invoke(
        cli,
        [
            "train",
            "--data",
            str(train_file),
            "--horizon",
            "3",
            "--input-periods",
            "2",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "30 series (1MS), L = 24, min history 12" in result.output
    assert "validation MASE " in result.output and ", seasonal naive " in result.output  # L given: scored too
    new_file = long_file(seasonal_panel(4, seed=8, lengths=(20, 30)), "new.csv", "opened_")
    out = tmp_path / "forecast.csv"
    result = runner.invoke(
        cli, ["forecast", "--model", str(tmp_path / "model.json"), "--data", str(new_file), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert frame["unique_id"].unique().tolist() == ["opened_0", "opened_1", "opened_2", "opened_3"]
    # the forecast column is named after the model, by default its folder's name (as export --name)
    assert list(frame.columns) == ["unique_id", "ds", tmp_path.name]
    assert len(frame) == 4 * 3 and np.isfinite(frame[tmp_path.name]).all()


def test_one_pass_streams_series_that_are_never_held_whole() -> None:
    train, _ = split(seasonal_panel(40, seed=9))
    one_pass = PanelConfig(horizon=H, period=PERIOD, input_periods=2, irls=0)
    streamed = fit_global((s for s in train), one_pass, 24)
    held = fit_global(train, one_pass, 24)
    np.testing.assert_allclose(streamed.forecast(train), held.forecast(train), rtol=1e-9)
    with pytest.raises(ValueError, match="once per pass: give a sequence"):
        fit_global((s for s in train), CFG, 24)


def test_a_lone_series_too_short_for_held_out_windows_is_calibrated_on_its_local_half() -> None:
    """48 monthly values at H 18 hold one held-out window after the read-out's training window (50%
    only); the hybrid's local half, fitted on each window alone, is out of sample at every window that
    holds its min_values (7 here), so the widths come from its errors: 80% and up, the export says so,
    and each score is the members' forecast alone against the window's targets over the service's
    spread. A read-out without a local half keeps its one window."""
    from app.artifacts import readout
    from app.artifacts.readout.calibration import service_spread
    from app.artifacts.readout.windows import series_windows
    from export.global_models.onnx import calibrate_global, readout_spec

    v = seasonal_panel(1, seed=3, lengths=(48, 49))[0]
    model = train_global([v], PanelConfig(horizon=18, period=PERIOD), "1MS", local=True)
    local, spec, levels = model.local, readout_spec(model), [50.0, 80.0, 90.0]
    assert local is not None and local.min_values == 24
    alone = readout.calibrate([v], spec, levels, lambda n: 18)
    assert alone.windows == 1 and alone.intervals is not None and alone.intervals["levels"] == [50.0]
    cal = readout.calibrate([v], spec, levels, lambda n: 18, local=local)
    assert cal.intervals is not None and cal.intervals["levels"] == levels
    report = cal.intervals["calibration"]
    assert report["scored"] == "local_half" and report["held_out_windows"] == 1
    assert cal.windows == 48 - 24 - 18 + 1 == len(cal.scores) and cal.per_series == (7,)
    W, L = max(spec.input_length, local.length), spec.input_length
    win = series_windows(v, W, 18, 24)  # every window whose input holds the members' min_values
    assert win is not None
    x, m, t = win
    members = dataclasses.replace(local, weights=tuple(w / local.share for w in local.weights))
    window = np.where(m > 0, x, np.nan).astype(np.float32)
    point = members.combine(np.zeros((len(x), 18)), window, L)  # the read-out's share 0
    spread = service_spread(x[:, W - L :], m[:, W - L :], PERIOD)
    np.testing.assert_allclose(cal.scores, np.abs(t - point) / spread[:, None], rtol=1e-9)
    want = readout.pooled_intervals(cal.scores, levels, L, PERIOD)["widths"]
    assert cal.intervals["widths"] == want
    intervals, said = calibrate_global(model, [v], levels)
    assert intervals is not None and intervals["levels"] == levels
    assert said.startswith(
        "intervals at [50.0, 80.0, 90.0] from its local half's errors at 7 windows of 1 series, each "
        "fitted on the window alone (the hybrid's own held-out windows, 1, reach no level from 80%"
    )
