"""Naive references beside every test MSE: what a forecast must beat to be worth anything.

- **last value**: every step of the horizon repeats the window's last value;
- **seasonal naive**: step h repeats the value one season before it, x[L − P + (h mod P)], for a season
  of P steps (the model's cycle, else a calendar year of monthly data, else the training data's dominant
  period up to the window length);
- **mean** (climatology): every step is the channel's training mean, so that a model that only predicts
  the mean is never reported as beating the naive forecasts by a wide margin.

Both are scored exactly as the model is (`export.evaluate.evaluate`): MSE and MAE on the standardised
data (each channel minus its training mean, over its training standard deviation), averaged over every
window, step and channel of the split. On that scale, predicting each channel's training mean scores
about 1.0 on data like the training rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import torch

from export.cycle import detect_cycle
from export.data import Dataset, Split
from export.reports import Metrics, NaiveReferences, SeasonalNaiveScore

__all__ = ["UNITS", "naive_references", "season", "skill", "summary"]

UNITS = (
    "MSE and MAE on standardised values: each channel minus its training mean, over its training standard "
    "deviation (predicting the training mean scores about 1.0 on data like the training rows)"
)

_CALENDAR = re.compile(r"^(\d+)M[SE]$")


def season(ds: Dataset, cycle_period: int = 0) -> tuple[int, str]:
    """The season P (in steps, 2..L) of the seasonal naive forecast, and where it comes from (a detected
    cycle that is not a whole number of steps, or is read as a harmonic, says so: `detect_cycle`)."""
    period, source, rule = _season(ds, cycle_period)
    return period, source if rule is None else f"{source} ({rule})"


def _season(ds: Dataset, cycle_period: int) -> tuple[int, str, str | None]:
    """`season`, with the detection's rule apart (None unless the period was detected and not whole)."""
    L = ds.train.input_length
    if 2 <= cycle_period <= L:
        return cycle_period, "the model's cycle", None
    calendar = _CALENDAR.match(ds.series.frequency)
    if calendar and 12 % int(calendar[1]) == 0 and 2 <= 12 // int(calendar[1]) <= L:
        return 12 // int(calendar[1]), "a calendar year", None
    try:
        cycle = detect_cycle(ds.train.data, L)
    except ValueError:  # too few training rows to read a period off: a season of one window
        return max(2, L), "the window length", None
    return (
        cycle.period,
        "the training data's dominant period",
        None if cycle.rule.startswith("whole") else cycle.rule,
    )


@torch.no_grad()
def _scores(
    split: Split, forecast: Callable[[torch.Tensor], torch.Tensor], batch: int = 512
) -> dict[str, float]:
    se = ae = 0.0
    n = split.num_windows
    for start in range(0, n, batch):
        x, y = split.windows(torch.arange(start, min(start + batch, n)))
        err = forecast(x) - y
        se += float((err * err).sum(dtype=torch.float64))
        ae += float(err.abs().sum(dtype=torch.float64))
    count = n * split.horizon * split.data.shape[1]
    return {"mse": se / count, "mae": ae / count}


def naive_references(ds: Dataset, split: Split, cycle_period: int = 0) -> NaiveReferences:
    """Last-value, seasonal-naive and training-mean MSE and MAE on every window of `split`, in the model's
    units (standardised on the training rows: the training mean is 0 there)."""
    L, H = split.input_length, split.horizon
    period, source, rule = _season(ds, cycle_period)
    # Step h reads x[L - P + (h mod P)]: one season back, repeated over the horizon.
    lags = torch.tensor([L - period + (h % period) for h in range(H)])
    last = _scores(split, lambda x: x[:, -1:, :].expand(-1, H, -1))
    seasonal = _scores(split, lambda x: x[:, lags, :])
    mean = _scores(split, lambda x: x.new_zeros((x.shape[0], H, x.shape[2])))
    return NaiveReferences(
        last_value=Metrics(**last),
        seasonal_naive=SeasonalNaiveScore(**seasonal, period=period, period_from=source, period_rule=rule),
        mean=Metrics(**mean),
        windows=split.num_windows,
    )


def skill(mse: float, reference: float) -> float | None:
    """1 − MSE / reference MSE: the share of the reference's error the forecast removes (None if 0)."""
    return None if reference <= 0 or not math.isfinite(reference) else 1.0 - mse / reference


def summary(mse: float, naive: NaiveReferences) -> str:
    """One line for the CLI: the references and the model's skill over the better naive one, and over the
    training mean where the report has it (a model near the mean says so, whatever the naive ones score)."""
    last, seasonal = naive.last_value.mse, naive.seasonal_naive
    best = min(last, seasonal.mse)
    gain = skill(mse, best)
    verdict = ""
    if gain is not None:
        side = "below" if gain >= 0 else "ABOVE"
        verdict = f": the model's MSE is {abs(100 * gain):.0f}% {side} the better one"
    how = f"; {seasonal.period_rule}" if seasonal.period_rule else ""
    line = (
        f"naive references on the same {naive.windows} test windows: last value MSE {last:.4f}, "
        f"seasonal naive (period {seasonal.period}{how}) MSE {seasonal.mse:.4f}{verdict}"
    )
    if naive.mean is not None:  # reports written before the mean reference have none
        over_mean = skill(mse, naive.mean.mse)
        line += f"; the training mean MSE {naive.mean.mse:.4f}"
        if over_mean is not None:
            side = "below" if over_mean >= 0 else "ABOVE"
            line += f": {abs(100 * over_mean):.0f}% {side} it"
    return line
