"""Reports written as JSON: dataclasses with a `kind` and a `schema_version`, written and read here only.

A report class names its `kind` and its current `schema_version` (class variables); `write_report`
stores its fields (nested dataclasses as objects) with both, and `read_report` builds the class back
from the file, field by field from its type hints, after the class's `migrate` has brought an older
layout up to date. A file of another kind, or of a schema newer than the code, or holding a key its
class does not declare, is refused with its path; readers then use attributes, never string keys.

    write_report(path, CompetitionRun(scores=[...]))
    run = read_report(path, CompetitionRun)   # run.scores[0].mase

The writing and reading are export/report_io.py's, the global models' and competitions' classes
export/reports_competitions.py's; every name imports from here.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from export.report_io import ReportError, SameFields, build, from_dict, read_report, to_dict, write_report
from export.reports_competitions import (
    CompetitionCandidate,
    CompetitionData,
    CompetitionGeoMean,
    CompetitionPublished,
    CompetitionRun,
    CompetitionScore,
    GroupCoverage,
    IntervalCalibration,
    UnseenCheck,
)
from models import ModelConfig

__all__ = [
    "CompetitionCandidate",
    "CompetitionData",
    "CompetitionGeoMean",
    "CompetitionPublished",
    "CompetitionRun",
    "CompetitionScore",
    "DataRecord",
    "EpochRecord",
    "EvaluationReport",
    "FitScores",
    "GroupCoverage",
    "IntervalCalibration",
    "IntervalEvaluation",
    "LevelScore",
    "MethodScore",
    "Metrics",
    "NaiveReferences",
    "RecipeRow",
    "RecipesRun",
    "ReportError",
    "SeasonalNaiveScore",
    "SweepRow",
    "SweepRun",
    "TrainingReport",
    "UnseenCheck",
    "WindowCounts",
    "build",
    "from_dict",
    "read_report",
    "to_dict",
    "write_report",
]

# -- export/train.py -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Metrics:
    """MSE (and MAE) over every window of a split, on the scaled data."""

    mse: float
    mae: float | None = None


@dataclasses.dataclass(frozen=True)
class SeasonalNaiveScore:
    mse: float
    mae: float
    period: int  # the season P, in steps
    period_from: str  # where P comes from: the model's cycle, a calendar year, the detected cycle ...
    period_rule: str | None = None  # how a detected cycle became whole steps, where it was not whole


@dataclasses.dataclass(frozen=True)
class NaiveReferences:
    """Last-value, seasonal-naive and training-mean scores on the same windows (export/naive.py)."""

    last_value: Metrics
    seasonal_naive: SeasonalNaiveScore
    windows: int
    mean: Metrics | None = None  # reports written before the mean reference have none


@dataclasses.dataclass(frozen=True)
class WindowCounts:
    train: int
    val: int
    test: int


@dataclasses.dataclass(frozen=True)
class FitScores:
    """A closed-form fit's scores: the linear path, the read-out, step 0, the least-squares reference."""

    ridge: float | None = None
    features: int | None = None
    train_mse: float | None = None
    val_mse: float | None = None
    val_origins: list[float] | None = None  # validation MSE from each of several origins
    val_origins_mean: float | None = None
    test_mse: float | None = None


@dataclasses.dataclass(frozen=True)
class EpochRecord:
    epoch: int
    train_loss: float
    val_mse: float
    val_mae: float
    lr_end: float
    seconds: float


@dataclasses.dataclass(frozen=True)
class InputLengthSearch:
    rule: str
    validation_mse: dict[str, Any]  # per input length: a score, or why it was not scored
    chosen: int


@dataclasses.dataclass(frozen=True)
class DataRecord:
    """Where a run's data came from and how it was read (the checkpoint's data record, less its scaler)."""

    name: str
    path: str
    sha256: str
    mode: str
    target: str | None
    protocol: str
    borders: list[int]
    channels: list[str]
    frequency: str
    frequency_seconds: float | None
    timestamp_column: str | None = None
    drop: list[str] = dataclasses.field(default_factory=list)
    keep: list[str] = dataclasses.field(default_factory=list)
    fill: str = "none"
    date_format: str | None = None
    dayfirst: bool | None = None
    layout: str | None = None
    id_column: str | None = None
    target_column: str | None = None
    sort: bool | None = None
    timezone: str | None = None
    date_format_read: str | None = None
    inserted_steps: int = 0
    nonnegative: list[str] = dataclasses.field(default_factory=list)
    nonnegative_rule: str | None = None
    never_negative: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Environment:
    torch: str
    threads: int
    python: str
    machine: str
    cpus: int | None


@dataclasses.dataclass(frozen=True)
class TrainingReport(SameFields):
    """A training run's report.json (export/train.py): what was trained on what, how it scored against
    the naive references, what was kept and why, and the recurrence the model learned."""

    kind: ClassVar[str] = "training_run"
    # 2: kind and schema_version. 1 (no version) had the same fields; `ablation` (gates or REM zeroed,
    # test MSE) was written by the trained read-out's runs (results/rem-readout-trained) only.
    schema_version: ClassVar[int] = 2

    name: str
    variant: str
    config: dict[str, Any]  # the run's TrainConfig as given (its fields change between versions)
    model_config: ModelConfig  # the trained model's (older reports lack fields added since: defaults)
    parameters: int
    seed: int
    data: DataRecord
    windows: WindowCounts
    epochs: list[EpochRecord]
    best_epoch: int
    val: Metrics
    test: Metrics
    wall_time_s: float
    seconds_per_epoch: float | None
    recurrence: list[dict[str, Any]]  # models' recurrence_report(): per layer, its heads' λ/γ/θ and gates
    environment: Environment
    checkpoint: str
    plot: str
    calibration: str | None = None  # what the export will calibrate, or why not
    linear_fit: FitScores | None = None
    readout_fit: FitScores | None = None
    step0: FitScores | None = None
    least_squares_reference: FitScores | None = None
    readout_ablation: dict[str, FitScores] | None = None
    ablation: dict[str, float] | None = None
    selection: str | None = None
    input_length_search: InputLengthSearch | None = None
    naive: NaiveReferences | None = None
    units: str | None = None


# -- export/conformal.py ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class HorizonScore:
    coverage: float
    width: float
    winkler: float


@dataclasses.dataclass(frozen=True)
class LevelScore:
    """One interval level on every test window: coverage (share inside), mean width, interval (Winkler)
    score, per step, per channel and per request horizon."""

    level: float
    coverage: float
    width: float
    winkler: float
    coverage_by_step: list[float]
    width_by_step: list[float]
    coverage_by_channel: list[float]
    by_request_horizon: dict[str, HorizonScore]

    @property
    def channel_off(self) -> float:
        """The largest |coverage − nominal| over the channels, in points."""
        return max(abs(100 * c - self.level) for c in self.coverage_by_channel)


@dataclasses.dataclass(frozen=True)
class MethodScore:
    """A calibration method on the validation-internal splits (export.conformal.select_method)."""

    outside_bands: float
    coverage_error: float
    channel_error_max: float
    score90: float


@dataclasses.dataclass(frozen=True)
class SplitWindows:
    split: str
    rows: list[int]
    windows: int


@dataclasses.dataclass(frozen=True)
class BandsPlot:
    file: str
    channel: str
    windows: list[int]


@dataclasses.dataclass(frozen=True)
class IntervalEvaluation:
    """A served version's intervals evaluated on its test split (export/conformal.py `write_report`)."""

    kind: ClassVar[str] = "interval_evaluation"
    # 2: kind and schema_version; the validation-internal splits apart from the methods' scores
    # (`selection_splits`; 1 kept them under selection["splits"]).
    schema_version: ClassVar[int] = 2

    model: str
    version: int
    dataset: str
    horizon: int
    input_length: int
    channels: list[str]
    levels: list[float]
    calibration: dict[str, Any]  # the manifest's intervals.calibration block, as served
    test: SplitWindows
    units: str
    scale_floor: float
    command: str
    plot: BandsPlot
    variants: dict[str, list[LevelScore]]  # "served" and every candidate method, per level
    served_method: str = "absolute"
    methods: dict[str, str] = dataclasses.field(default_factory=dict)  # method -> what it is
    selection: dict[str, MethodScore] = dataclasses.field(default_factory=dict)
    selection_splits: list[str] = dataclasses.field(default_factory=list)
    folder: str | None = None  # where it was read from (set by the reader, relative to the repository)

    def rows(self, variant: str) -> dict[float, LevelScore]:
        return {row.level: row for row in self.variants[variant]}

    @staticmethod
    def migrate(raw: dict[str, Any], version: int) -> dict[str, Any]:
        selection = dict(raw.pop("selection", None) or {})
        return {**raw, "selection_splits": selection.pop("splits", []), "selection": selection}


# -- export/sweep.py -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SweepRow:
    """One (variant, horizon, seed, mode) of a sweep: its read-out refitted in closed form and scored."""

    variant: str
    horizon: int
    seed: int
    mode: str
    set: list[str]  # the variant's config overrides
    heads: int
    features: int
    train_mse: float
    val_mse: float
    val_origins: list[float]  # validation MSE from each rolling origin
    val_origins_mean: float
    test_mse: float
    seconds: float


@dataclasses.dataclass(frozen=True)
class SweepRun(SameFields):
    """A sweep's results file (export/sweep.py): the sweep file, its spec as loaded, and its rows."""

    kind: ClassVar[str] = "sweep_run"
    schema_version: ClassVar[int] = 2  # 2: kind and schema_version; 1 the same fields without them

    sweep: str  # the sweep file, relative to the repository
    spec: dict[str, Any]  # the sweep file's content, validated by export.sweep.load_sweep
    rows: list[SweepRow]


# -- export/recipes.py -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RecipeRow:
    """One recipe trained on one example file: what its training report says of it."""

    data: str
    recipe: str
    input_length: int
    input_length_search: InputLengthSearch | None
    val_mse: float
    test_mse: float
    test_mae: float | None
    naive: NaiveReferences | None
    windows: WindowCounts
    wall_time_s: float


@dataclasses.dataclass(frozen=True)
class RecipesRun(SameFields):
    """`python -m export.recipes`: every recipe on every example file (results/own-data/report.json)."""

    kind: ClassVar[str] = "recipes_run"
    schema_version: ClassVar[int] = 2  # 2: kind and schema_version; 1 the same fields without them

    command: str
    protocol: str
    rows: list[RecipeRow]


# -- export/evaluate.py ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EvaluationReport:
    """`python -m export.evaluate`: a checkpoint's MSE and MAE on the scaled data over every window of a
    split (printed as JSON)."""

    kind: ClassVar[str] = "evaluation"
    schema_version: ClassVar[int] = 1

    checkpoint: str
    data: str
    split: str
    mse: float
    mae: float
    windows: int
