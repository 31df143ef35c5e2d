"""The one place where a protocol asks for a model's calibrated prediction intervals.

KServe time series' `options.quantiles` and OIP v2's interval outputs both come here, before the session
runs. These two protocols do not serve intervals yet (the manifest's `intervals` block and
`app/inference/intervals.py`, which `/v1` uses, are to be wired in here): every such request is refused
with a 4xx whose code says why, never answered with made-up numbers and never a 500.
"""

from __future__ import annotations

from app.core.errors import InvalidInput
from app.inference.registry import ModelVersion


class NoCalibratedIntervals(InvalidInput):
    """The request asks for quantiles or interval bounds of a model that has no calibrated intervals."""

    code = "no_calibrated_intervals"


class IntervalsNotServedHere(InvalidInput):
    """The model has calibrated intervals, but this protocol does not serve them yet (`/v1` does)."""

    code = "intervals_not_served"


def check_intervals(mv: ModelVersion, asked: object, field: str) -> None:
    """Refuse `asked` (quantile levels, interval output names): NoCalibratedIntervals for a version without
    intervals, IntervalsNotServedHere for one with them. The hook where calibrated intervals get wired in."""
    if mv.manifest is not None and mv.manifest.intervals is not None:
        raise IntervalsNotServedHere(
            f"model {mv.name} version {mv.version} has calibrated prediction intervals, but {field} {asked} "
            f"is not served by this protocol yet; ask /v1/models/{mv.name}/forecast with `level` or "
            "`quantiles`",
            field=field,
        )
    raise NoCalibratedIntervals(
        f"model {mv.name} version {mv.version} has no calibrated prediction intervals, so {field} "
        f"{asked} cannot be answered; ask for the point forecast only",
        field=field,
    )
