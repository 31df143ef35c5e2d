"""A synthetic "bring your own CSV" file with the quirks real exports have, and a forecast request for it.

    .venv/bin/python -m export.example_data runs/example     # writes grid.csv and grid_request.json there

`grid.csv` is 2,000 hourly rows of a made-up grid load (MW, daily and weekly cycles, a trend, noise) and
temperature, written the way a spreadsheet in many locales exports it: `;` between fields, decimal
commas, the timestamp column `when` third and with UTC offsets (Europe/Madrid, across a DST change), a
text column `site`, and a few empty cells. Generated, never downloaded (seeded: the same file every
time). `grid_request.json` is a `/v1` forecast body: the last 96 rows as named columns, with `start`.
The README's walk-through trains, evaluates, exports and serves a model of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import typer

ROWS = 2000
REQUEST_ROWS = 96
GAPS = (100, 101, 102, 750, 1400)  # rows whose load is left empty


def grid_frame(rows: int = ROWS, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    when = pd.date_range("2023-03-01", periods=rows, freq="h", tz="Europe/Madrid")
    hours = np.arange(rows)
    temp = 14 + 6 * np.sin(2 * np.pi * (hours - 15) / 24) + 0.002 * hours + rng.normal(0, 0.8, rows)
    load = (
        900
        + 120 * np.sin(2 * np.pi * (hours - 8) / 24)
        + 60 * np.sin(2 * np.pi * hours / 168)
        + 4 * (temp - 14)
        + 0.02 * hours
        + rng.normal(0, 15, rows)
    )
    return pd.DataFrame({"site": "north", "load_mw": load.round(1), "when": when, "temp_c": temp.round(2)})


def write_example(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    frame = grid_frame()
    lines = ["site;load_mw;when;temp_c"]
    for i, row in enumerate(frame.itertuples(index=False)):
        load = "" if i in GAPS else f"{row.load_mw:.1f}".replace(".", ",")
        temp = f"{row.temp_c:.2f}".replace(".", ",")
        lines.append(f"{row.site};{load};{row.when.isoformat()};{temp}")
    csv = folder / "grid.csv"
    csv.write_text("\n".join(lines) + "\n")
    tail = frame.iloc[-REQUEST_ROWS:]
    request = {
        "series": [
            {
                "id": "north",
                "values": {"load_mw": tail["load_mw"].tolist(), "temp_c": tail["temp_c"].tolist()},
                "start": tail["when"].iloc[0].isoformat(),
            }
        ]
    }
    body = folder / "grid_request.json"
    body.write_text(json.dumps(request))
    return csv, body


def main(
    folder: Annotated[Path, typer.Argument(help="where to write grid.csv and grid_request.json")],
) -> None:
    """Write the synthetic grid-load CSV and a forecast request for it."""
    for path in write_example(folder):
        typer.echo(path)


if __name__ == "__main__":
    typer.run(main)
