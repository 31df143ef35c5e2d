"""The global REM read-out's computation, torch-free: its features, its ridge fit and its interval widths.

The one home of this code. The exporter (export/global_models/model.py: `fit_global`, `GlobalModel.forecast`;
export/global_models/onnx.py: `calibrate_global`) and the service's fit on request (`/v1/.../fit_forecast`,
app/inference/refit.py) both call it, so a read-out refitted by the service is the one the
exporter would have fitted on the same series with the same settings.

Each window of L steps is divided by its own scale (the mean |value| of its last cycle); its features are
the last rows of a fixed REM bank applied to the normalised window (`rem_kernels`), its last `n_lags`
values and the share of the window that is missing; a ridge regression (`NormalEquations`, float64)
maps them to the H normalised future values. A version folder carries what a refit needs in its
manifest's `readout` block (`ReadoutSpec`, written by export/global_models/onnx.py; docs/artifacts.md).

The package by role: `spec` (the manifest's block), `windows` (windows, scales, features, the
forecast), `fit` (the ridge fit) and `calibration` (the interval widths). Every name is importable
from here.
"""

from __future__ import annotations

# The package's public names, each defined in the module of its role (imported below).
__all__ = [
    "BUFFER_ROWS",
    "CACHE_ROWS",
    "MAX_FIT_WINDOWS",
    "PARITY_TOLERANCE",
    "PARITY_UNIT",
    "READOUT_SCHEMA",
    "SCALE_FLOOR",
    "STILL_SHARE",
    "TINY",
    "Calibration",
    "CovariateRows",
    "FitSettings",
    "Lift",
    "NormalEquations",
    "ReadoutSpec",
    "accumulate",
    "block_cuts",
    "cache_rows",
    "calibrate",
    "calibration_tail",
    "covariate_features",
    "features",
    "fit_ends",
    "fit_lift",
    "fit_weights",
    "forecast",
    "history_edges",
    "hold_still",
    "last_windows",
    "level_plan",
    "naive_error",
    "output_scales",
    "pooled_intervals",
    "random_layer",
    "raw_forecast",
    "rem_kernels",
    "scale_errors",
    "series_windows",
    "service_spread",
    "short_blocks",
    "solve_passes",
    "still_cycles",
    "training_windows",
    "window_ends",
    "window_scales",
    "windows_at",
]

from app.artifacts.readout.calibration import (
    SCALE_FLOOR,
    Calibration,
    block_cuts,
    calibrate,
    calibration_tail,
    history_edges,
    level_plan,
    pooled_intervals,
    service_spread,
    short_blocks,
)
from app.artifacts.readout.fit import (
    BUFFER_ROWS,
    CACHE_ROWS,
    NormalEquations,
    accumulate,
    cache_rows,
    fit_lift,
    fit_weights,
    solve_passes,
    training_windows,
)
from app.artifacts.readout.spec import (
    READOUT_SCHEMA,
    FitSettings,
    Lift,
    ReadoutSpec,
    random_layer,
    rem_kernels,
)
from app.artifacts.readout.windows import (
    MAX_FIT_WINDOWS,
    PARITY_TOLERANCE,
    PARITY_UNIT,
    STILL_SHARE,
    TINY,
    CovariateRows,
    covariate_features,
    features,
    fit_ends,
    forecast,
    hold_still,
    last_windows,
    naive_error,
    output_scales,
    raw_forecast,
    scale_errors,
    series_windows,
    still_cycles,
    window_ends,
    window_scales,
    windows_at,
)
