"""The reports of the global models' benchmarks and calibration (export/reports.py re-exports them): a
global model's interval calibration (`IntervalCalibration`, the manifest's `intervals.calibration`) and
a competitions run (`CompetitionRun`, `python -m bench.competitions --json`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar


@dataclasses.dataclass(frozen=True)
class GroupCoverage:
    """Pooled intervals' empirical coverage on one group of series: the share of held-out values inside
    the interval at each level (keys: the level in percent, as text)."""

    group: str  # e.g. "history 48-95", or "all"
    series: int
    coverage: dict[str, float]


@dataclasses.dataclass(frozen=True)
class IntervalCalibration:
    """A global model's interval calibration (export/global_models/onnx.py `calibrate_global`; the manifest's
    `intervals.calibration`): the levels calibrated, those dropped and why, and the coverage per
    history-length group, out of fold (each half of the series scored against widths from the other; one
    series: each half of its windows)."""

    kind: ClassVar[str] = "interval_calibration"
    schema_version: ClassVar[int] = 1

    series: int
    levels: list[float]
    dropped_levels: list[float]
    dropped_because: str | None
    coverage: list[GroupCoverage]
    pooled: str = "across series, per horizon step, in units of each window's seasonal-naive error"
    # The windows scored (one per series, or several per series where the series are few; None: a report
    # written before they could be several).
    windows: int | None = None
    # The rule the widths were set by (app/artifacts/readout/calibration.py `calibrate`): "split_conformal";
    # manifests written from issue 43 until 2026-12-04 may say "split_conformal_drift" with `drift` (the
    # earlier origin and each level's factor: a correction since dropped, bench/drift_backtest.py).
    rule: str = "split_conformal"
    drift: dict[str, Any] | None = None
    # Levels beyond the windows' reach, their widths extrapolated from the highest level calibrated
    # (app/artifacts/readout/calibration.py `pooled_intervals`); none in reports written before.
    extrapolated_levels: list[float] = dataclasses.field(default_factory=list)
    # Levels calibrated by the largest window's score alone, held at least the level below's width times
    # the tail ratio (app/artifacts/readout/calibration.py `floored_levels`); none in reports written before.
    floored_levels: list[float] = dataclasses.field(default_factory=list)
    # What the widths' windows scored (app/artifacts/readout/calibration.py `calibrate`): "held_out", the
    # model's forecasts of each series' held-out last values (every report written before says nothing);
    # "local_half", a hybrid's local models fitted on each window alone, where the held-out windows
    # (`held_out_windows` of them) reach no level from 80%.
    scored: str = "held_out"
    held_out_windows: int | None = None


# -- bench/competitions.py -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CompetitionScore:
    """One model's mean metrics over a competition's series, and its times (seconds)."""

    data: str  # "M3 monthly"
    model: str
    series: int
    smape: float
    mase: float
    mape: float | None  # Tourism's metric; None on M3
    fit_s: float
    forecast_s: float | None = None
    # fev's WQL over quantiles 0.1-0.9 (schema 3; None: the model gave no quantiles).
    wql: float | None = None
    coverage_80: float | None = None  # share of hold-out values inside the 80% interval (q 0.1 to 0.9)


@dataclasses.dataclass(frozen=True)
class UnseenCheck:
    """MASE on the odd-numbered series of a model trained on the even-numbered ones only (never seen)
    against one trained on all; `ratio` unseen / all."""

    mase_trained_on_all: float
    mase_unseen: float
    ratio: float


@dataclasses.dataclass(frozen=True)
class CompetitionCandidate:
    """One setting our model's validation chose among (an input length): its validation MASE (each
    series' last H training values held out) beside its MASE on the official hold-outs."""

    name: str  # "L=72"
    validation_mase: float
    test_mase: float
    chosen: bool


@dataclasses.dataclass(frozen=True)
class CompetitionData:
    """What a run measured on one data set beside the scores."""

    horizon: int
    input_length_search_val_mase: dict[str, float] = dataclasses.field(default_factory=dict)
    unseen: UnseenCheck | None = None
    # The global model's intervals, calibrated on the histories alone, scored on the hold-outs.
    interval_levels: list[float] = dataclasses.field(default_factory=list)
    interval_note: str | None = None  # what was calibrated, or why a level has no interval
    coverage: list[GroupCoverage] = dataclasses.field(default_factory=list)
    # Schema 3: the cycle, our model's candidates (validation beside test) and what it reported.
    period: int | None = None
    candidates: list[CompetitionCandidate] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    # The seasonal naive's point forecast at every quantile: its WQL (a WAPE) is fev's SeasonalNaive's
    # (no intervals there), the reference of the relative WQL.
    naive_point_wql: float | None = None


@dataclasses.dataclass(frozen=True)
class CompetitionPublished:
    """A published model's score on one task (bench/published.py: fev's result files)."""

    data: str  # "M3 monthly"
    model: str
    mase: float
    wql: float | None
    file: str  # the result file it was read from
    kind: str = "foundation"  # or "statsforecast": fev's own run of a model this benchmark fits


@dataclasses.dataclass(frozen=True)
class CompetitionGeoMean:
    """The geometric mean over `tasks` of a model's score relative to the seasonal naive's on each task
    (this run's seasonal naive for this run's models, the published one for published models)."""

    model: str
    source: str  # "this run" or "published"
    tasks: list[str]
    mase: float
    wql: float | None


@dataclasses.dataclass(frozen=True)
class CompetitionRun:
    """One run of `python -m bench.competitions --json`: every (data set, model) row and, per data set,
    the input-length search, the unseen-series check and the intervals' coverage; since schema 3 also
    the protocol, the published numbers beside, the geometric means and the run's wall time."""

    kind: ClassVar[str] = "competition_run"
    # 2: kind and schema_version; per-data-set results under `data` (1 kept them at the top level,
    # beside `scores`); interval coverage per series group. 3: WQL and 80% coverage per score, our
    # model's candidates, the published scores, geometric means, protocol and wall time (all optional).
    schema_version: ClassVar[int] = 3

    scores: list[CompetitionScore]
    data: dict[str, CompetitionData] = dataclasses.field(default_factory=dict)
    command: str | None = None
    ours: str | None = None  # the model name of our rows (bench/competition_ours.py `run_ours`'s label)
    protocol: str | None = None  # how this run scored every model
    published_protocol: str | None = None  # how the published numbers were scored, and where from
    published: list[CompetitionPublished] = dataclasses.field(default_factory=list)
    geomean: list[CompetitionGeoMean] = dataclasses.field(default_factory=list)
    total_s: float | None = None  # the whole command's wall time
    machine: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    @staticmethod
    def migrate(raw: dict[str, Any], version: int) -> dict[str, Any]:
        if version < 2:
            scores = raw.pop("scores", [])
            raw = {"scores": scores, "data": {k: v for k, v in raw.items() if isinstance(v, dict)}}
        return raw  # 2 -> 3: only fields with defaults were added
