"""Loading, validating, splitting and scaling time-series files for the RSA forecasters.

- `options`: `ReadOptions`, every choice about reading a file, carried as one object;
- `reading`: a wide CSV (one timestamp column, a numeric column per channel) read and validated cell by
  cell (`load_csv`); every problem raises one `DataError` naming its line and column;
- `timestamps`: the timestamp formats, the series' step (fixed or calendar months) and its grid;
- `panels`: long files (`unique_id, ds, y`: one row per series and time step, CSV or Parquet), each
  series with its own calendar and length (`load_panel`);
- `scaling`: the per-channel `StandardScaler`;
- `splits`: the standard long-term-forecasting splits of a series as sliding windows (`load_dataset`).

The package only reads files; it never writes any.
"""

from export.data.errors import DataError
from export.data.layout import ID_NAMES, TARGET_NAMES
from export.data.options import FILL_METHODS, LAYOUTS, PANEL_OPTIONS, READ_OPTIONS, ZONE_OPTIONS, ReadOptions
from export.data.panels import Panel, PanelSeries, key_columns, load_panel, one_series_file
from export.data.reading import Series, load_csv
from export.data.scaling import StandardScaler
from export.data.splits import ETT_DIR, PROTOCOLS, Dataset, Split, load_dataset, split_series
from export.data.timestamps import TIMESTAMP_NAMES, _infer_frequency, candidate_formats

__all__ = [
    "ETT_DIR",
    "FILL_METHODS",
    "ID_NAMES",
    "LAYOUTS",
    "PANEL_OPTIONS",
    "PROTOCOLS",
    "READ_OPTIONS",
    "TARGET_NAMES",
    "TIMESTAMP_NAMES",
    "ZONE_OPTIONS",
    "DataError",
    "Dataset",
    "Panel",
    "PanelSeries",
    "ReadOptions",
    "Series",
    "Split",
    "StandardScaler",
    "_infer_frequency",
    "candidate_formats",
    "key_columns",
    "load_csv",
    "load_dataset",
    "load_panel",
    "one_series_file",
    "split_series",
]
