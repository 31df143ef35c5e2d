"""Reports written as JSON: dataclasses with a `kind` and a `schema_version`, written and read here only.

A report class names its `kind` and its current `schema_version` (class variables); `write_report`
stores its fields (nested dataclasses as objects) with both, and `read_report` builds the class back
from the file, field by field from its type hints, after the class's `migrate` has brought an older
layout up to date. A file of another kind, or of a schema newer than the code, or holding a key its
class does not declare, is refused with its path; readers then use attributes, never string keys.

    write_report(path, CompetitionRun(scores=[...]))
    run = read_report(path, CompetitionRun)   # run.scores[0].mase
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union

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

R = TypeVar("R")


class ReportError(ValueError):
    """A report file that is not of the expected kind or schema."""


def to_dict(report: Any) -> dict[str, Any]:
    """The report's fields as JSON-ready values, with its kind and schema version first."""
    return {"kind": report.kind, "schema_version": report.schema_version, **dataclasses.asdict(report)}


def write_report(path: Path, report: Any, indent: int | None = 2) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_dict(report), indent=indent) + "\n")
    return path


def read_report(path: Path, cls: type[R]) -> R:
    """The report at `path` as `cls` (an older schema migrated by `cls.migrate`)."""
    try:
        return from_dict(cls, json.loads(Path(path).read_text()))
    except ReportError as e:
        raise ReportError(f"{path}: {e}") from None


def from_dict(cls: type[R], data: dict[str, Any]) -> R:
    """`cls` from parsed JSON: its kind checked, an older schema migrated, every field built by type."""
    kind, schema = getattr(cls, "kind"), getattr(cls, "schema_version")  # noqa: B009 (class variables)
    version = int(data.get("schema_version") or 1)  # the first layouts carried no version
    if data.get("kind", kind) != kind:
        raise ReportError(f"a {data.get('kind')!r} report, not {kind!r}")
    if version > schema:
        raise ReportError(f"{kind} schema {version} is newer than this code's ({schema})")
    data = getattr(cls, "migrate")(dict(data), version) if version < schema else data  # noqa: B009
    return _build(cls, data)


def build(cls: type[R], fields: dict[str, Any]) -> R:
    """`cls` from a mapping of its fields (nested parts as mappings or as built objects), checked as a
    read is: a missing field or one it does not declare is a ReportError."""
    return _build(cls, fields)


def _build(tp: Any, value: Any) -> Any:
    """`value` (parsed JSON) as type `tp`: dataclasses field by field, lists, dicts and optionals of
    them; anything else as it is."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(options[0], value) if len(options) == 1 else value
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_build(item, v) for v in value]
    if origin is dict:
        _, item = typing.get_args(tp)
        return {k: _build(item, v) for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):  # built already
            return value
        if hasattr(tp, "from_dict"):  # a type that reads its own mapping (models.ModelConfig)
            return tp.from_dict(value)
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp) if f.init}
        unknown = sorted(set(value) - known - {"kind", "schema_version"})
        if unknown:  # every field ever written is declared: nothing is dropped unseen
            raise ReportError(f"{tp.__name__} has no field {unknown}")
        missing = [
            f.name
            for f in dataclasses.fields(tp)
            if f.init
            and f.name not in value
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise ReportError(f"{tp.__name__} lacks {missing}")
        return tp(**{k: _build(hints[k], v) for k, v in value.items() if k in known})
    if tp is float and isinstance(value, int):
        return float(value)
    return value


@dataclasses.dataclass(frozen=True)
class GroupCoverage:
    """Pooled intervals' empirical coverage on one group of series: the share of held-out values inside
    the interval at each level (keys: the level in percent, as text)."""

    group: str  # e.g. "history 48-95", or "all"
    series: int
    coverage: dict[str, float]


@dataclasses.dataclass(frozen=True)
class IntervalCalibration:
    """A global model's interval calibration (export/global_onnx.py `calibrate_global`; the manifest's
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
    # The rule the widths were set by (app/artifacts/readout.py `calibrate`): "split_conformal", or
    # "split_conformal_drift" with `drift` (the earlier origin and each level's factor); a report written
    # before the rule was named is split_conformal.
    rule: str = "split_conformal"
    drift: dict[str, Any] | None = None


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
    ours: str | None = None  # the model name of our rows (bench/competitions.py `run_ours`'s label)
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
class TrainingReport:
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

    @staticmethod
    def migrate(raw: dict[str, Any], version: int) -> dict[str, Any]:
        return raw  # schema 1 is schema 2 without its kind and version


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
class SweepRun:
    """A sweep's results file (export/sweep.py): the sweep file, its spec as loaded, and its rows."""

    kind: ClassVar[str] = "sweep_run"
    schema_version: ClassVar[int] = 2  # 2: kind and schema_version; 1 the same fields without them

    sweep: str  # the sweep file, relative to the repository
    spec: dict[str, Any]  # the sweep file's content, validated by export.sweep.load_sweep
    rows: list[SweepRow]

    @staticmethod
    def migrate(raw: dict[str, Any], version: int) -> dict[str, Any]:
        return raw


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
class RecipesRun:
    """`python -m export.recipes`: every recipe on every example file (results/own-data/report.json)."""

    kind: ClassVar[str] = "recipes_run"
    schema_version: ClassVar[int] = 2  # 2: kind and schema_version; 1 the same fields without them

    command: str
    protocol: str
    rows: list[RecipeRow]

    @staticmethod
    def migrate(raw: dict[str, Any], version: int) -> dict[str, Any]:
        return raw


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
