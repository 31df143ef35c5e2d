"""Channels that are never negative (sales, counts, spend): the service clips their interval bounds at 0.

A forecast ± a calibrated width (docs/intervals.md) can reach below zero for a series that cannot: an 80%
interval of "−79 to 310" on a spend column. Training decides which channels are non-negative, the export
states it in the manifest (`intervals.nonnegative`, one flag per channel, and `dataset.nonnegative`), and
the service clips those channels' bounds at 0 for every protocol (app/inference/intervals.py).

Declared (`nonnegative: all`, or a list of channel names; `--nonnegative NAME` on the command line), or
detected (`auto`, the default): a channel with no negative value in the training rows **and** at least
`ZERO_SHARE` (5%) of them exactly 0, the floor the series keeps returning to (closed days, no sale, no
spend). Never negative alone is not enough: ETTh2's oil temperature has no negative value in its training
rows and goes below zero later in the file, and a temperature, a balance or a net flow may always do so.
Channels that are never negative in the training rows but not detected are named in a hint, so a user
can declare them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from export.data import Dataset

__all__ = [
    "ZERO_SHARE",
    "detected",
    "never_negative",
    "panel_nonnegative",
    "resolve_nonnegative",
    "undeclared",
]

ZERO_SHARE = 0.05
_KEYWORDS = ("auto", "none", "all")
DETECTED = f"detected: no negative value and at least {ZERO_SHARE:.0%} zeros in the training rows"


def _training_values(ds: Dataset) -> np.ndarray:
    """The training rows of the model's channels as the file holds them [rows, C]."""
    start, end = ds.borders["train"]
    return ds.series.values[start:end][:, [ds.series.columns.index(c) for c in ds.channels]]


def detected(values: np.ndarray) -> bool:
    """The `auto` rule on one channel's observed values (NaN left out): no negative value and at least
    ZERO_SHARE of them exactly 0."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    return bool(v.size) and float(v.min()) >= 0 and float((v == 0).mean()) >= ZERO_SHARE


def panel_nonnegative(setting: str, series: Sequence[np.ndarray]) -> tuple[bool, str]:
    """Whether a global model's one target is non-negative, from the series it was trained on, and how
    that was decided: `auto` (`detected` over every series' values), `none` or `all`. ValueError for
    another setting, or `all` where a series goes below zero."""
    values = np.concatenate([np.asarray(v, dtype=np.float64).reshape(-1) for v in series] or [np.empty(0)])
    if setting == "auto":
        return detected(values), DETECTED
    if setting == "none":
        return False, "declared: none"
    if setting != "all":
        raise ValueError(
            f"nonnegative: use auto, none or all (a global model has one target), got {setting!r}"
        )
    if not never_negative(values):
        raise ValueError(
            f"nonnegative: the series go down to {float(np.nanmin(values)):g}, so their intervals cannot be "
            "clipped at 0; use auto or none"
        )
    return True, "declared"


def never_negative(values: np.ndarray) -> bool:
    """No observed value (NaN left out) below 0."""
    v = np.asarray(values, dtype=np.float64)
    return not bool((v[~np.isnan(v)] < 0).any())


def resolve_nonnegative(setting: str | Sequence[str], ds: Dataset) -> tuple[list[str], str]:
    """The non-negative channels (in the model's order) and how that was decided. ValueError for an
    unknown channel, or a declared one whose training rows go below zero."""
    if not isinstance(setting, str) and len(setting) == 1 and setting[0] in _KEYWORDS:
        setting = setting[0]  # `--nonnegative all` arrives as a list of one
    values = _training_values(ds)
    if setting == "auto":
        return [c for j, c in enumerate(ds.channels) if detected(values[:, j])], DETECTED
    if setting == "none":
        return [], "declared: none"
    names = (
        list(ds.channels) if setting == "all" else [setting] if isinstance(setting, str) else list(setting)
    )
    unknown = [name for name in names if name not in ds.channels]
    if unknown:
        raise ValueError(
            f"nonnegative: {unknown} are not channels of the model {ds.channels}; use auto, none, all or "
            "channel names"
        )
    for name in names:
        low = float(values[:, ds.channels.index(name)].min())
        if low < 0:
            raise ValueError(
                f"nonnegative: channel {name!r} is declared non-negative, but its training rows go down to "
                f"{low:g}; leave it out of --nonnegative"
            )
    return [c for c in ds.channels if c in names], "declared"


def undeclared(ds: Dataset, nonnegative: Sequence[str]) -> list[str]:
    """Channels with no negative value in the training rows that are not declared non-negative."""
    values = _training_values(ds)
    return [c for j, c in enumerate(ds.channels) if values[:, j].min() >= 0 and c not in nonnegative]
