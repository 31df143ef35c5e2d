"""One global model over many series: the closed-form REM read-out over windows from every series.

Each window of L = k·period steps is divided by its own scale (the mean |value| of its last cycle), so
no parameter belongs to a series: the model forecasts series it never saw, of the same frequency. Its
features are the last rows of a fixed bank of REMs (export/bank.py's spec; the kernels of models/rem.py:
regular decays, damped cyclic harmonics of the period, same-phase dilated decays) applied to the
normalised window, the window's last `lags` values, and the share of the window that is missing. One
ridge regression (app/artifacts/readout.py, numpy: the service refits with it) maps them to the H
normalised future values; its normal equations are accumulated series by series, so memory does not
grow with the number of series.

Short histories: a window reaching back before a series' first value has that start masked (zeros that
the features see as missing, with the missing share as a feature), not filled with invented values.
Every series of at least `min_history` values is forecast; the model states that minimum.

The input length is searched in periods of the cycle (`INPUT_PERIODS`) on validation only: the last H
values of every training series are held out, the read-out fitted on the rest and scored by MASE there.

    python -m export.panel train --data stores_long.csv --horizon 12 --out runs/stores
    python -m export.panel forecast --model runs/stores/model.json --data new_stores.csv
    python -m export.panel forecast --model runs/shops/model.json --data shops.csv --future-file promo.csv
    python -m export.panel export --model runs/stores/model.json --name stores --repository model_repository

`export` publishes the model as an ONNX graph the service serves (export/global_onnx.py). Covariates
(`--future`, `--past`, `--static`, `--calendar`; export/covariates.py, docs/panels.md) add features to
the same ridge.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from collections.abc import Sequence
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer

from app.artifacts.contract import forecast_columns
from app.artifacts.covariates import CovariateLayout
from app.inference.metrics import mape, mase, seasonal_naive, seasonal_naive_scale, smape
from export.cli_options import ModelNameOption, RepositoryOption
from export.covariates import (
    CovariatePlan,
    CovariateSeries,
    ablation_rows,
    covariate_lines,
    series_covariate_rows,
)
from export.global_model import SCHEMA_VERSION, GlobalModel, fit_global
from export.global_model import _covariate_rows as _covariate_rows
from export.global_model import _features as _features
from export.global_model import _plain as _plain
from export.global_model import _series_windows as _series_windows
from export.hybrid import Origin, local_search, origins
from export.panel_config import PanelConfig, default_bank, rem_kernels, series_values
from rsa_core.calendar import calendar_step
from rsa_core.future import future_rows_problem
from rsa_core.steps import steps_after
from rsa_core.zones import model_zone

if TYPE_CHECKING:  # the transformer is imported where the command line asks for it
    from export.panel_transformer import Budget

__all__ = [
    "INPUT_PERIODS",
    "SCHEMA_VERSION",
    "GlobalModel",
    "PanelConfig",
    "default_bank",
    "fit_global",
    "mape",
    "mase",
    "rem_kernels",
    "seasonal_naive_score",
    "smape",
    "summary_lines",
    "train_global",
    "training_record",
]

# Training series whose last timestamps a model records one by one (beyond: only the last of all).
TRAINING_ENDS = 10_000
# Input lengths searched, in periods of the cycle (a monthly model: 12, 24, 36, 48, 72 steps).
INPUT_PERIODS = (1, 2, 3, 4, 6)
# The covariate report's validation origins (issue 45, item 6): each series' last H, H + H//2, ... values
# held out (export/hybrid.py `origins`), more than the model's choices are made on, so that one common
# shock (many series' last windows share calendar time) cannot decide a covariate's verdict.
REPORT_ORIGINS = 4


def training_record(items: Sequence[Any]) -> dict[str, Any] | None:
    """What a model was trained on, for the service to tell a backtest's in-sample cutoffs (the manifest's
    `panel.training`): the series, the last timestamp of all (`end`, UTC), and each series' last by its id
    (`ends`, up to TRAINING_ENDS series). `items` hold `id` and `timestamps` (UTC datetime64); None
    where they do not."""
    import pandas as pd

    ends: dict[str, str] = {}
    for s in items:
        stamps = getattr(s, "timestamps", None)
        if stamps is None or not len(stamps):
            return None
        ends[str(s.id)] = pd.Timestamp(stamps[-1]).tz_localize("UTC").isoformat()
    if not ends:
        return None
    record: dict[str, Any] = {"series": len(ends), "end": max(ends.values(), key=pd.Timestamp)}
    if len(ends) <= TRAINING_ENDS:
        record["ends"] = ends
    return record


def _cut(v: Any, k: int) -> Any:
    """A series without its last k values (a CovariateSeries with its covariates)."""
    return v.head(len(v) - k) if isinstance(v, CovariateSeries) else series_values(v)[:-k]


def _origins(series: Sequence[Any], cfg: PanelConfig, n_origins: int | None = None) -> list[Origin]:
    if n_origins is None:
        return origins(series, cfg.horizon, cfg.history, cfg.train_min, _cut)
    return origins(series, cfg.horizon, cfg.history, cfg.train_min, _cut, n_origins)


def _validation_forecasts(
    series: Sequence[Any], cfg: PanelConfig, length: int, plan: CovariatePlan | None, val: Sequence[Origin]
) -> list[np.ndarray]:
    """Per origin, the forecasts [S, H] of a read-out of input `length` fitted on the series' parts
    before it (export/hybrid.py)."""
    H = cfg.horizon
    layout = None if plan is None else plan.layout(length, H)
    out = []
    for o in val:
        model = fit_global(o.fit_part, cfg, length, layout)
        rows = None
        if layout is not None:
            rows = np.concatenate(
                [
                    series_covariate_rows(series[i], layout, np.array([len(p)]))
                    for i, p in zip(o.keep, o.fit_part, strict=True)
                ]
            )
        out.append(model.forecast([series_values(v) for v in o.fit_part], covariates=rows))
    return out


def _validate(
    series: Sequence[np.ndarray] | Sequence[CovariateSeries],
    cfg: PanelConfig,
    length: int,
    plan: CovariatePlan | None,
    n_origins: int | None = None,
) -> tuple[float, float, tuple[float, ...]]:
    """(mean MASE, mean scaled MSE, MASE at each origin) over the validation origins (export/hybrid.py;
    `n_origins` of them, default its N_ORIGINS) of a read-out of input `length` fitted on every series'
    part before each origin and forecasting the H values after it (MSE per series in units of its
    seasonal-naive error squared)."""
    val = _origins(series, cfg, n_origins)
    forecasts = _validation_forecasts(series, cfg, length, plan, val)
    mases, mses = [], []
    for o, fc in zip(val, forecasts, strict=True):
        insample = [series_values(v) for v in o.fit_part]
        scale = np.array([seasonal_naive_scale(v, cfg.period) for v in insample])
        mse = ((o.held - fc) ** 2).mean(1) / scale**2
        mases.append(o.score(fc, cfg.period))
        mses.append(float(np.mean(mse[o.scored])))
    return float(np.mean(mases)), float(np.mean(mses)), tuple(mases)


def seasonal_naive_score(val: Sequence[Origin], period: int, horizon: int) -> float:
    """The seasonal naive forecast's mean MASE over the validation origins, scored as the model is
    (`Origin.score`: the same series, the same H values after each origin)."""
    scores = []
    for o in val:
        fc = np.array([seasonal_naive(series_values(v), horizon, period) for v in o.fit_part])
        scores.append(o.score(fc, period))
    return float(np.mean(scores))


def summary_lines(model: GlobalModel) -> list[str]:
    """What `export.panel train` prints after its first line: the validation MASE beside the seasonal
    naive's on the same origins, and the input lengths searched."""
    search, out = model.search, []
    if "model" in search and "seasonal_naive" in search:
        what = "the hybrid" if model.local is not None else "the read-out"
        ratio = search["model"] / search["seasonal_naive"] if search["seasonal_naive"] > 0 else float("nan")
        out.append(
            f"validation MASE {search['model']:.4f} ({what}), seasonal naive {search['seasonal_naive']:.4f} "
            f"on the same origins (each series' last H and H + H//2 values held out): {ratio:.3f} of the "
            "naive's"
        )
    lengths = sorted((int(k), v) for k, v in search.items() if k.isdigit())
    if len(lengths) > 1:
        cells = ", ".join(
            f"{k}: {v:.4f}" + (" (chosen)" if k == model.input_length else "") for k, v in lengths
        )
        out.append(f"input length searched (validation MASE of the read-out): {cells}")
    return out


def covariate_report(
    series: Sequence[CovariateSeries], cfg: PanelConfig, length: int, plan: CovariatePlan
) -> list[dict[str, Any]]:
    """Per covariate (the calendar as one): validation MASE and scaled MSE with every covariate and
    without that one, over REPORT_ORIGINS origins, and the verdict (`ablation_rows`: it helps where it
    lowers the mean MASE, the MASE at most origins and not the MSE). A covariate that does not help is
    reported as such; it is kept (retrain without it to drop it)."""
    return ablation_rows(plan, lambda p: _validate(series, cfg, length, p, REPORT_ORIGINS))


def train_global(
    series: Sequence[np.ndarray] | Sequence[CovariateSeries],
    cfg: PanelConfig,
    frequency: str | None = None,
    plan: CovariatePlan | None = None,
    report: bool = True,
    local: bool = False,
) -> GlobalModel:
    """Search the input length (in periods) on validation when `cfg.input_periods` is None, then fit on
    every window of every series. Validation (export/hybrid.py): at two origins, each series' values
    after the origin held out, the read-out fitted on what comes before and scored by mean MASE on them;
    the series' hold-outs are never fitted on. `local`: the hybrid (a model without covariates only),
    its local window chosen on the same origins (`search` holds `local_<length>` and `global`).
    With covariates (`plan`, series of `CovariateSeries`), each is also scored on validation with and
    without it (`covariate_report`, unless `report` is False)."""
    start = time.perf_counter()
    search: dict[str, float] = {}
    periods = (cfg.input_periods,) if cfg.input_periods is not None else INPUT_PERIODS
    lengths = [k * cfg.period if cfg.period > 1 else 4 * k for k in periods]
    # `auto`: the input length searched under each effect (relative or both), the pair of lowest
    # validation MASE kept (issue 45, item 6: searched under relative alone, it missed a better both).
    effects = ("relative", "both") if plan is not None and plan.effect == "auto" else (None,)
    if len(lengths) > 1 or len(effects) > 1:
        grid: dict[tuple[int, str | None], float] = {}
        for e in effects:
            tried = plan if plan is None or e is None else dataclasses.replace(plan, effect=e)
            for length in lengths:
                grid[length, e] = _validate(series, cfg, length, tried)[0]
        best, effect = min(grid, key=lambda k: grid[k])
        if len(lengths) > 1:  # each length's best over the effects (the summary's table)
            search.update({str(n): min(v for (m, _), v in grid.items() if m == n) for n in lengths})
        if len(effects) > 1:  # each effect's best over the lengths
            search.update({f"effect_{e}": min(v for (_, f), v in grid.items() if f == e) for e in effects})
            assert plan is not None and effect is not None
            plan = dataclasses.replace(plan, effect=effect)
    else:
        best = lengths[0]
    hybrid = None
    if local:
        if plan is not None:
            raise ValueError("the hybrid's local models read the target alone: a covariate model has none")
        val = _origins(series, cfg)
        hybrid, scores = local_search(
            val, _validation_forecasts(series, cfg, best, None, val), cfg.period, cfg.horizon
        )
        search.update(scores)
    if hybrid is not None:  # the chosen hybrid's validation score
        chosen = search[f"local_{'+'.join(hybrid.members)}_{hybrid.length}"]
    elif plan is not None and f"effect_{plan.effect}" in search:
        chosen = search[f"effect_{plan.effect}"]
    elif str(best) in search:
        chosen = search[str(best)]
    else:  # the input length given: scored on validation all the same, for the summary
        chosen = _validate(series, cfg, best, plan)[0]
    search["model"] = chosen
    search["seasonal_naive"] = seasonal_naive_score(_origins(series, cfg), cfg.period, cfg.horizon)
    model = fit_global(series, cfg, best, None if plan is None else plan.layout(best, cfg.horizon))
    model.local = hybrid
    if plan is not None and report:
        model.covariate_report = covariate_report(series, cfg, best, plan)  # type: ignore[arg-type]
    model.search, model.frequency = search, frequency
    model.fit_seconds = time.perf_counter() - start
    return model


# -- CLI -------------------------------------------------------------------------------------------

cli = typer.Typer(add_completion=False, help=__doc__.split("\n\n")[0])
ModelFileOption = Annotated[Path, typer.Option(help="a model.json written by train")]


def _period_of(frequency: str) -> int:
    """The cycle of a frequency alias: monthly 12, quarterly 4, hourly 24, daily 7, else 1."""
    table = {"1MS": 12, "1ME": 12, "3MS": 4, "3ME": 4, "12MS": 1, "12ME": 1, "1h": 24, "1D": 7, "7D": 52}
    return table.get(frequency, 1)


def train_transformer(
    series: Sequence[Any],
    cfg: PanelConfig,
    frequency: str | None,
    timezone: str | None,
    plan: CovariatePlan | None,
    path: Path,
    budget: Budget,
    drop: tuple[str, ...] = (),
) -> list[str]:
    """`python -m export.panel train --network transformer`: train at L = `cfg.input_periods` periods, or
    at the input length the read-out's validation search picks on the same series (as
    bench/global_transformer.py does: one closed-form fit per length, where a transformer search would
    train once per length), save the model file at `path`; returns the lines saying what was done."""
    from export.panel_transformer import train_panel_transformer
    from export.transformer_onnx import SavedTransformer, save_transformer

    if cfg.input_periods is not None:
        length = cfg.input_periods * cfg.period if cfg.period > 1 else 4 * cfg.input_periods
        how = "given"
    else:
        length = train_global(series, cfg, frequency=frequency, plan=plan, report=False).input_length
        how = "the read-out's validation search"
    model = train_panel_transformer(series, cfg, length, budget=budget, plan=plan)
    model.drop = drop  # the columns left out, as the read-out's model.json records them (issue 45, item 9)
    save_transformer(SavedTransformer(model, frequency, timezone), path)
    lines = [
        f"RSA-Transformer, L = {length} ({how}), min history {cfg.history}, {model.parameters} parameters, "
        f"best epoch {model.best_epoch} (validation MASE {model.val_mase:.4f}), stopped: {model.stopped}, "
        f"trained in {model.fit_seconds:.1f} s: {path}"
    ]
    return lines + covariate_lines(model.covariate_report)


@cli.command()
def train(
    data: Annotated[Path, typer.Option(help="a long file (CSV or Parquet): id, timestamp, target")],
    horizon: Annotated[int, typer.Option(help="steps to forecast")],
    out: Annotated[Path, typer.Option(help="folder for model.json")] = Path("runs/panel"),
    period: Annotated[
        int | None, typer.Option(help="the cycle in steps (default: from the frequency)")
    ] = None,
    input_periods: Annotated[int | None, typer.Option(help="L in periods (default: searched)")] = None,
    id_column: Annotated[str | None, typer.Option()] = None,
    timestamp_column: Annotated[str | None, typer.Option()] = None,
    target_column: Annotated[str | None, typer.Option()] = None,
    sort: Annotated[bool, typer.Option(help="sort rows by series and time")] = False,
    fill: Annotated[str, typer.Option(help="none, linear, ffill or zero")] = "none",
    drop: Annotated[str, typer.Option(help="columns to leave out, comma-separated")] = "",
    timezone: Annotated[
        str | None, typer.Option(help="IANA zone of timestamps without offset (the calendar's zone)")
    ] = None,
    future: Annotated[str, typer.Option(help="future-known covariate columns, comma-separated")] = "",
    past: Annotated[str, typer.Option(help="past-only covariate columns, comma-separated")] = "",
    static: Annotated[str, typer.Option(help="static (per-series) covariate columns, comma-separated")] = "",
    calendar: Annotated[
        str, typer.Option(help="calendar features of each horizon step: hour,dayofweek,month,holiday")
    ] = "",
    holidays: Annotated[
        str | None, typer.Option(help="country code of the 'holiday' calendar feature (holidays package)")
    ] = None,
    layout: Annotated[
        str,
        typer.Option(help="long (id, timestamp, target), or wide: one series, a column each (covariates)"),
    ] = "long",
    effect: Annotated[
        str,
        typer.Option(
            help="how covariates move the forecast: relative to each window's level (promotions), additive "
            "in the target's units (temperature), both (the read-out weighs each), or auto: relative or "
            "both, whichever validates better"
        ),
    ] = "auto",
    local: Annotated[
        bool,
        typer.Option(
            help="the hybrid (the default without covariates): the read-out averaged with Theta and the "
            "damped trend fitted per series at forecast time (export/hybrid.py); --no-local: the read-out "
            "alone"
        ),
    ] = True,
    network: Annotated[
        str,
        typer.Option(
            help="readout: the closed-form REM read-out; transformer: the global RSA-Transformer, trained by "
            "gradient within the budget below (export/panel_transformer.py; docs/panels.md)"
        ),
    ] = "readout",
    epochs: Annotated[int | None, typer.Option(help="transformer: at most this many epochs (20)")] = None,
    windows_per_epoch: Annotated[
        int | None, typer.Option(help="transformer: windows drawn per epoch (4096)")
    ] = None,
    max_seconds: Annotated[
        float | None, typer.Option(help="transformer: the cap on a training's seconds (240)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="transformer: the seed of its start and batches (0)")] = (
        None
    ),
    start: Annotated[
        str | None,
        typer.Option(
            help="transformer: least_squares (the default: the linear path at its ridge solution, attention "
            "from 0) or random (PyTorch's initialisation)"
        ),
    ] = None,
) -> None:
    """Train a global model on every series of a long file (with covariates: docs/panels.md)."""
    from export.covariates import CovariatePlan, load_covariate_panel, load_covariate_wide
    from export.data import DataError, ReadOptions, load_panel

    def names(text: str) -> list[str]:
        return [n.strip() for n in text.split(",") if n.strip()]

    try:
        options = ReadOptions(
            id_column=id_column,
            timestamp_column=timestamp_column,
            target_column=target_column,
            sort=sort,
            fill=fill,
            timezone=timezone,
            drop=tuple(names(drop)),
        )
    except DataError as e:  # a zone name that is none
        raise typer.BadParameter(str(e), param_hint="--timezone") from None
    kinds = {"future": names(future), "past": names(past), "static": names(static)}
    cal = names(calendar)
    if holidays and "holiday" not in cal:
        cal.append("holiday")
    from app.artifacts.covariates import EFFECTS

    if effect not in (*EFFECTS, "auto"):
        raise typer.BadParameter(
            f"must be one of {[*EFFECTS, 'auto']}, got {effect!r}", param_hint="--effect"
        )
    if layout not in ("long", "wide"):
        raise typer.BadParameter(f"must be long or wide, got {layout!r}", param_hint="--layout")
    if network not in ("readout", "transformer"):
        raise typer.BadParameter(f"must be readout or transformer, got {network!r}", param_hint="--network")
    budget_options: dict[str, Any] = {  # Budget's fields by option (int, float or str; None: not given)
        "--epochs": epochs,
        "--windows-per-epoch": windows_per_epoch,
        "--max-seconds": max_seconds,
        "--seed": seed,
        "--start": start,
    }
    given = [k for k, v in budget_options.items() if v is not None]
    if network == "readout" and given:  # said, never ignored
        raise typer.BadParameter(
            "a training budget is the transformer's: the read-out is fitted in closed form (add "
            "--network transformer)",
            param_hint=given[0],
        )
    if network == "transformer" and effect not in ("auto", "relative"):
        raise typer.BadParameter(
            "the transformer reads covariates relative to each window's scale (its input is scaled): "
            "leave --effect out",
            param_hint="--effect",
        )
    budget: Any = None
    if network == "transformer":
        from export.panel_transformer import Budget

        try:  # refused before the data is read
            budget = Budget(
                **{k.lstrip("-").replace("-", "_"): v for k, v in budget_options.items() if v is not None}
            )
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint=given[0] if given else None) from None
    if layout == "wide" and kinds["static"]:
        raise typer.BadParameter(
            "a wide file is one series: it has no static covariates", param_hint="--static"
        )
    try:
        if layout == "wide":
            wide = ReadOptions(timestamp_column=timestamp_column, fill=fill, timezone=timezone)
            one, frequency = load_covariate_wide(data, wide, target_column, kinds["past"], kinds["future"])
            loaded: Sequence[Any] = one
            plan = None
            series: list[np.ndarray] | list[CovariateSeries] = [one[0].values]
            if kinds["past"] or kinds["future"] or cal:
                plan = CovariatePlan.fit(
                    one, kinds["past"], kinds["future"], cal, (), holidays, timezone, effect
                )
                series = one
            count = 1
        elif any(kinds.values()) or cal:
            series, frequency = load_covariate_panel(
                data, options, kinds["past"], kinds["future"], kinds["static"]
            )
            loaded = series
            plan = CovariatePlan.fit(
                series, kinds["past"], kinds["future"], cal, kinds["static"], holidays, timezone, effect
            )
            count = len(series)
        else:
            panel = load_panel(data, options)
            loaded = panel.series
            series, frequency, plan, count = (
                [s.values for s in panel.series],
                panel.frequency,
                None,
                len(panel),
            )
    except DataError as e:
        raise typer.BadParameter(str(e), param_hint="--data") from None
    except ValueError as e:  # a calendar feature or holiday country the model cannot derive
        raise typer.BadParameter(str(e), param_hint="--calendar") from None
    cfg = PanelConfig(horizon=horizon, period=period or _period_of(frequency), input_periods=input_periods)
    if network == "transformer":
        try:
            lines = train_transformer(
                series,
                cfg,
                frequency,
                timezone,
                plan,
                out / "model.json",
                budget,
                options.drop if layout == "long" else (),
            )
        except ValueError as e:  # too short for a window
            raise typer.BadParameter(str(e), param_hint="--data") from None
        typer.echo(f"{count} series ({frequency}): " + "\n".join(lines))
        return
    try:
        model = train_global(series, cfg, frequency=frequency, plan=plan, local=local and plan is None)
        model.timezone = timezone
        model.training = training_record(loaded)
        if options.drop and layout == "long" and model.training is not None:
            # the columns left out, so that export --data reads the file as train did (issue 45, item 9)
            model.training = {**model.training, "drop": list(options.drop)}
    except ValueError as e:  # too short for a window: said as an error, not a traceback
        raise typer.BadParameter(str(e), param_hint="--data") from None
    path = model.save(out / "model.json")
    hybrid = (
        ""
        if model.local is None
        else f", averaged with {' and '.join(model.local.members)} on the last {model.local.length} values"
    )
    typer.echo(
        f"{count} series ({frequency}), L = {model.input_length}, "
        f"min history {model.min_history}{hybrid}, fitted in {model.fit_seconds:.2f} s: {path}"
    )
    for line in [*summary_lines(model), *covariate_lines(model.covariate_report)]:
        typer.echo(line)


@cli.command("export")
def export_command(
    model: ModelFileOption,
    name: ModelNameOption,
    repository: RepositoryOption = Path("my_models"),
    version: Annotated[int | None, typer.Option(help="the version to write (default: the next)")] = None,
    channel: Annotated[str, typer.Option(help="the name the service gives the forecast's one channel")] = "y",
    data: Annotated[
        Path | None,
        typer.Option(help="the long file it was trained on: calibrates prediction intervals (else none)"),
    ] = None,
    sort: Annotated[bool, typer.Option(help="sort the --data rows by series and time")] = False,
    timezone: Annotated[
        str | None, typer.Option(help="the zone --data's local times were written in (as at train)")
    ] = None,
    layout: Annotated[
        str, typer.Option(help="--data is long, or wide (one series, as train read it)")
    ] = "long",
    drop: Annotated[
        str | None,
        typer.Option(help="--data's columns to leave out, comma-separated (default: those train left out)"),
    ] = None,
) -> None:
    """Publish a global model (a read-out or a transformer, as train wrote it) as an ONNX graph into a
    model repository (checked against the Python model), with intervals pooled across the series of
    `--data`."""
    from export.data import DataError
    from export.publish import VersionExistsError
    from export.transformer_onnx import is_transformer_file

    if is_transformer_file(model):
        import logging

        from export.transformer_onnx import export_transformer, load_transformer

        logging.getLogger("torch").setLevel(logging.ERROR)  # the exporter's notes on absent torchvision ops

        saved = load_transformer(model)
        net = saved.model
        intervals, said = None, "no intervals (give --data, the training file, to calibrate them)"
        if data is not None:
            from export.panel_transformer import calibrate_transformer

            try:
                series = _training_series(
                    data,
                    net.covariates,
                    timezone or saved.timezone,
                    sort,
                    layout,
                    ",".join(net.drop) if drop is None else drop,  # default: the columns train left out
                )
                intervals, said = calibrate_transformer(net, series)
            except DataError as e:
                raise typer.BadParameter(str(e), param_hint="--data") from None
            except ValueError as e:  # not the series it was trained on
                raise typer.BadParameter(str(e), param_hint="--data") from None
        try:
            folder = export_transformer(saved, repository, name, version, channel, intervals)
        except (ValueError, VersionExistsError) as e:
            raise typer.BadParameter(str(e)) from None
        L, H = net.input_length, net.config.horizon
        typer.echo(
            f"{name} version {folder.name} (global transformer): L = {L}, H = {H}, min history "
            f"{net.config.history}, {said}: {folder}"
        )
        _echo_coverage(intervals)
        _echo_serving(repository)
        return
    from export.global_onnx import calibrate_global, export_global

    fitted = GlobalModel.load(model)
    intervals, said = None, "no intervals (give --data, the training file, to calibrate them)"
    if data is not None:
        if drop is None:  # the columns train left out, as model.json records them
            drop = ",".join((fitted.training or {}).get("drop", []))
        try:
            series = _training_series(
                data, fitted.covariates, timezone or fitted.timezone, sort, layout, drop
            )
        except DataError as e:
            raise typer.BadParameter(str(e), param_hint="--data") from None
        intervals, said = calibrate_global(fitted, series)
    try:
        folder = export_global(fitted, repository, name, version, channel, intervals)
    except (ValueError, VersionExistsError) as e:
        raise typer.BadParameter(str(e)) from None
    typer.echo(
        f"{name} version {folder.name}: L = {fitted.input_length}, H = {fitted.config.horizon}, "
        f"min history {fitted.min_history}, {said}: {folder}"
    )
    _echo_coverage(intervals)
    _echo_serving(repository)


def _echo_serving(repository: Path) -> None:
    """The exact command that serves `repository`: scripts/serve.sh polls it (RSA_MODEL_CONTROL=poll), so a
    service it started serves a new version without a restart."""
    typer.echo(
        f"  served by: RSA_MODEL_REPOSITORY={shlex.quote(str(repository))} bash scripts/serve.sh (it polls "
        "the repository every RSA_POLL_S seconds: a running one serves this version without a restart)"
    )


def _training_series(
    data: Path, covs: CovariateLayout | None, zone: str | None, sort: bool, layout: str, drop: str = ""
) -> list[Any]:
    """The training file's series as train read them: values alone, or (a covariate model) with the
    covariates by name, the calendar in the model's zone; `drop`: the columns train left out."""
    from export.data import ReadOptions, load_panel

    dropped = tuple(n.strip() for n in drop.split(",") if n.strip())
    if covs is None:
        return [
            s.values for s in load_panel(data, ReadOptions(sort=sort, timezone=zone, drop=dropped)).series
        ]
    from export.covariates import load_covariate_panel, load_covariate_wide

    options = ReadOptions(sort=sort, timezone=covs.timezone, drop=dropped)
    statics = [s.name for s in covs.static]
    if layout == "wide":
        return load_covariate_wide(data, options, None, covs.past, covs.future)[0]
    return load_covariate_panel(data, options, covs.past, covs.future, statics)[0]


def _echo_coverage(intervals: dict[str, Any] | None) -> None:
    if intervals is not None:
        from export.reports import IntervalCalibration, from_dict

        for group in from_dict(IntervalCalibration, intervals["calibration"]).coverage:
            shares = ", ".join(f"{level}%: {share:.3f}" for level, share in group.coverage.items())
            typer.echo(f"  coverage out of fold, {group.group} ({group.series} series): {shares}")


@cli.command()
def forecast(
    model: ModelFileOption,
    data: Annotated[
        Path,
        typer.Option(
            help="a long file of histories (any series, seen or not); a covariate model's past and static "
            "covariates are its columns, by name"
        ),
    ],
    out: Annotated[Path | None, typer.Option(help="CSV to write (default: print)")] = None,
    sort: Annotated[bool, typer.Option()] = False,
    timezone: Annotated[
        str | None, typer.Option(help="the zone --data's local times were written in (forecasts: UTC)")
    ] = None,
    drop: Annotated[str, typer.Option(help="columns of --data to leave out, comma-separated")] = "",
    future_file: Annotated[
        Path | None,
        typer.Option(
            help="a covariate model's future values (as NeuralForecast's futr_df, TimeGPT's X_df): a long "
            "CSV or Parquet file, id, timestamp and one column per future covariate, the H steps after "
            "each series' last timestamp"
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            help="the forecast column's name, the model's (default: the folder of --model, as export --name "
            "usually names it); the client and the batch command name theirs after the served model"
        ),
    ] = None,
) -> None:
    """Forecast every series of a long file (series never seen in training included): `unique_id, ds`
    and the forecast in a column named after the model (NeuralForecast's and TimeGPT's rule)."""
    import pandas as pd

    from export.data import DataError, load_panel
    from export.transformer_onnx import is_transformer_file

    if is_transformer_file(model):
        raise typer.BadParameter(
            "a global transformer is forecast through the service: export it (docs/panels.md)",
            param_hint="--model",
        )
    fitted = GlobalModel.load(model)
    zone = timezone or fitted.timezone
    if fitted.covariates is None and future_file is not None:
        raise typer.BadParameter(
            "the model reads no covariates: it takes no future values", param_hint="--future-file"
        )
    dropped = tuple(n.strip() for n in drop.split(",") if n.strip())
    histories: Sequence[Any]  # PanelSeries, or a covariate model's CovariateSeries
    rows: np.ndarray | None = None
    if fitted.covariates is None:
        try:
            panel = load_panel(data, sort=sort, timezone=zone, drop=dropped)
        except DataError as e:
            raise typer.BadParameter(str(e), param_hint="--data") from None
        histories, frequency = panel.series, panel.frequency
    else:
        histories, frequency, rows = _with_covariates(fitted, data, future_file, sort, zone, dropped)
    try:
        values = fitted.forecast([s.values for s in histories], covariates=rows)
    except ValueError as e:  # shorter than min_history
        raise typer.BadParameter(str(e), param_hint="--data") from None
    table = []
    for i, f in enumerate(values):
        s: Any = histories[i]
        table += [
            (s.id, t, float(v))
            for t, v in zip(_horizon(s.timestamps, frequency, len(f), zone, fitted.timezone), f, strict=True)
        ]
    column = forecast_columns(name or model.resolve().parent.name, ["y"])[0]
    frame = pd.DataFrame(table, columns=["unique_id", "ds", column])
    if out is None:
        typer.echo(frame.to_csv(index=False), nl=False)
    else:
        frame.to_csv(out, index=False)
        typer.echo(f"{len(histories)} series forecast: {out}")


def _horizon(
    stamps: np.ndarray, frequency: str, h: int, zone: str | None = None, model: str | None = None
) -> np.ndarray:
    """The h steps of `frequency` (the series' alias: `1h`, `1D`, `3MS`) after a series' last timestamp
    (UTC instants, datetime64[ns]), by the one stepping rule (`rsa_core.steps`), as the service and the
    batch scorer step them: days and months on the wall clock of `model`, the model's zone, shorter steps
    on the instants. A model without a zone (None) steps months on the wall clock of `zone`, the files'
    zone where they were read (UTC without one), and every fixed step on the instants."""
    import pandas as pd

    months = calendar_step(frequency)
    seconds = 0.0 if months is not None else pd.Timedelta(frequency).total_seconds()
    if model is not None:
        tz: tzinfo | None = model_zone(model)
    else:  # a UTC model, as before: months on the files' wall clock, fixed steps on the instants
        tz = None if zone is None or months is None else model_zone(zone)
    return steps_after(np.asarray(stamps[-1:], "datetime64[ns]"), h, seconds, months, tz)[0]


def _with_covariates(
    fitted: GlobalModel,
    data: Path,
    future_file: Path | None,
    sort: bool,
    zone: str | None,
    drop: tuple[str, ...] = (),
) -> tuple[list[CovariateSeries], str, np.ndarray]:
    """A covariate model's histories (past and static covariates from `data`'s columns), their
    frequency, and their `covariates` rows: the future covariates from `future_file`, which must hold
    exactly the H steps after each series' last timestamp; the calendar from those timestamps in the
    model's zone. The rows are the trainer's (series_covariate_rows on the history followed by the
    horizon). Every problem is a BadParameter naming the file, the series and the column."""
    import pandas as pd

    from export.covariates import file_columns, load_covariate_panel, load_future_values
    from export.data import DataError, ReadOptions

    covs = fitted.covariates
    assert covs is not None
    H = fitted.config.horizon
    statics = [s.name for s in covs.static]

    def bad(message: str, option: str = "--future-file") -> typer.BadParameter:
        return typer.BadParameter(message, param_hint=option)

    try:
        header = file_columns(data)
        absent = [n for n in (*covs.past, *statics) if n not in header]
        if absent:
            kind = "past" if absent[0] in covs.past else "static"
            raise DataError(
                f"{data.name} line 1, column {absent[0]!r}: missing; the model reads the {kind} covariate "
                f"{absent[0]!r} from the history file (past {list(covs.past)}, static {statics}); the "
                f"columns are {header}"
            )
        # The future covariates' past values, if the file has them (the training file does), are not read.
        unread = (*drop, *(n for n in covs.future if n in header))
        options = ReadOptions(sort=sort, timezone=zone, drop=unread)
        histories, frequency = load_covariate_panel(data, options, covs.past, (), statics)
    except DataError as e:
        raise bad(str(e), "--data") from None
    future: dict[str, CovariateSeries] = {}
    if covs.future:
        if future_file is None:
            raise bad(
                f"the model reads the future covariates {list(covs.future)}: give their values for the "
                f"{H} steps after each series' last timestamp with --future-file (docs/panels.md)"
            )
        if H == 1:  # the long reader infers each file's step from a series' rows: one row tells none
            raise bad(
                "a model of horizon 1: a future file holds one row per series, from which the long reader "
                "cannot tell the step; forecast it through the service (docs/panels.md, Covariates)"
            )
        try:
            future = load_future_values(future_file, ReadOptions(sort=sort, timezone=zone), covs.future)
        except DataError as e:
            raise bad(str(e)) from None
        known = {s.id for s in histories}
        unknown = [k for k in future if k not in known]
        if unknown:
            raise bad(
                f"{future_file.name} (series {unknown[0]!r}): no such series in {data.name}; the future "
                "values are those of the series forecast"
            )
    elif future_file is not None:
        raise typer.BadParameter(
            "the model reads no future covariates (its calendar comes from the timestamps): it takes no "
            "future values",
            param_hint="--future-file",
        )

    def show(t: np.datetime64) -> str:  # in the zone the files were written in
        return str(pd.Timestamp(t).tz_localize("UTC").tz_convert(zone or "UTC"))

    rows = []
    for s in histories:
        stamps = _horizon(s.timestamps, frequency, H, zone, fitted.timezone)
        n = len(s)
        after = {}
        if covs.future:
            assert future_file is not None
            given = future.get(s.id)
            problem = future_rows_problem(None if given is None else given.timestamps, stamps)
            if given is None or (problem is not None and problem.kind == "missing"):
                raise bad(
                    f"{future_file.name}: no rows for series {s.id!r}; it needs the {H} steps after the "
                    f"series' last timestamp {show(s.timestamps[-1])}"
                )
            if problem is not None and problem.kind == "count":
                raise bad(
                    f"{future_file.name} (series {s.id!r}): {len(given)} rows; the model's horizon needs "
                    f"{H}, the steps after the series' last timestamp {show(s.timestamps[-1])}"
                )
            if problem is not None:
                k = problem.row
                raise bad(
                    f"{future_file.name} (series {s.id!r}): row {k + 1} of the series is at "
                    f"{show(given.timestamps[k])}; horizon step {k + 1} after its last timestamp "
                    f"{show(s.timestamps[-1])} is {show(stamps[k])}"
                )
            after = given.future
        full = CovariateSeries(
            s.id,
            np.concatenate([s.values, np.full(H, np.nan)]),
            np.concatenate([s.timestamps, stamps]),
            past={p: np.concatenate([s.past[p], np.full(H, np.nan)]) for p in covs.past},
            future={f: np.concatenate([np.zeros(n), after[f]]) for f in covs.future},
            static=s.static,
        )
        try:
            rows.append(series_covariate_rows(full, covs, np.array([n])))
        except ValueError as e:  # a static value the model cannot encode (an unseen category)
            raise bad(f"{data.name} (series {s.id!r}): {e}", "--data") from None
    return histories, frequency, np.concatenate(rows)


if __name__ == "__main__":
    cli()
