"""The one place where a protocol asks for a model's calibrated prediction intervals.

KServe time series' `options.quantiles` and OIP v2's interval outputs both come here, before the session
runs. No served model has calibrated intervals yet (issue 16 brings them: the manifest's intervals and
`app/inference/intervals.py`); until `check_intervals` reads them, every such request is refused with a 4xx
whose code says so, never answered with made-up numbers and never a 500.
"""

from __future__ import annotations

from app.core.errors import InvalidInput
from app.inference.registry import ModelVersion


class NoCalibratedIntervals(InvalidInput):
    """The request asks for quantiles or interval bounds of a model that has no calibrated intervals."""

    code = "no_calibrated_intervals"


def check_intervals(mv: ModelVersion, asked: object, field: str) -> None:
    """Raise NoCalibratedIntervals: `asked` (quantile levels, interval output names) names intervals the
    version does not have. The hook where calibrated intervals get wired in."""
    raise NoCalibratedIntervals(
        f"model {mv.name} version {mv.version} has no calibrated prediction intervals, so {field} "
        f"{asked} cannot be answered; ask for the point forecast only",
        field=field,
    )
