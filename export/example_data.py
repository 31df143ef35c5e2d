"""A synthetic "bring your own CSV" file with the quirks real exports have, and a forecast request for it.

    .venv/bin/python -m export.example_data runs/example     # writes grid.csv and grid_request.json there

`grid.csv` is 2,000 hourly rows of a made-up grid load (MW, daily and weekly cycles, a trend, noise) and
temperature, written the way a spreadsheet in many locales exports it: `;` between fields, decimal
commas, the timestamp column `when` third and with UTC offsets (Europe/Madrid, across a DST change), a
text column `site`, and a few empty cells. Generated, never downloaded (seeded: the same file every
time). `grid_request.json` is a `/v1` forecast body: the last 96 rows as named columns, with `start`.
The README's walk-through trains, evaluates, exports and serves a model of it.

`sales.csv` is three years of a made-up shop's daily sales, written as many shops' tills export them:
dates day-first (DD/MM/YYYY) and no row for the days the shop is closed (25 December and 1 January).
`stores_long.csv` is a long file (`unique_id, ds, y`) of 20 made-up shops' monthly sales, each from its
own opening month, and `stores_request.json` a `/v1` body for two shops the file does not hold, one open
only 14 months (docs/panels.md serves a global model of it).

The grid and sales files are what a loader can get silently wrong (export/data.py reads the order off
the 13th of a month and refuses the gaps unless told how to fill them: `--fill zero`, for closed days).
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


SALES_DAYS = 3 * 365


def sales_frame(days: int = SALES_DAYS, seed: int = 0) -> pd.DataFrame:
    """Daily sales from 2021-01-01: a weekly pattern (Saturday high, Sunday low), a yearly one (December
    high), a slow trend and noise; closed days (25 December, 1 January) have no row."""
    rng = np.random.default_rng(seed)
    day = pd.date_range("2021-01-01", periods=days, freq="D")
    weekly = np.array([0.95, 0.9, 0.95, 1.0, 1.1, 1.35, 0.75])[day.day_of_week]
    yearly = 1 + 0.25 * np.cos(2 * np.pi * (day.day_of_year - 350) / 365.25)
    sales = 2000 * weekly * yearly * (1 + 0.0002 * np.arange(days)) * rng.lognormal(0, 0.08, days)
    frame = pd.DataFrame({"date": day, "sales": sales.round(2)})
    closed = ((day.month == 12) & (day.day == 25)) | ((day.month == 1) & (day.day == 1))
    return frame[~closed].reset_index(drop=True)


def write_sales(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    frame = sales_frame()
    csv = folder / "sales.csv"
    rows = [f"{t:%d/%m/%Y},{v:.2f}" for t, v in zip(frame["date"], frame["sales"], strict=True)]
    csv.write_text("\n".join(["date,sales", *rows]) + "\n")
    return csv


STORES, STORE_MONTHS = 20, 60


def store_sales(seed: int, months: int) -> np.ndarray:
    """A shop's monthly sales: its own level and seasonal phase, a yearly cycle, a slow trend, noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(months)
    level = rng.uniform(500, 3000)
    season = 0.25 * np.sin(2 * np.pi * t / 12 + rng.uniform(0, 2 * np.pi))
    return (level * (1 + season + 0.004 * t) * rng.lognormal(0, 0.04, months)).round(2)


def write_stores(folder: Path) -> tuple[Path, Path]:
    """`stores_long.csv` (store_00 ... store_19, 48 to 60 months each up to December 2023) and
    `stores_request.json` (store_21 from January 2021, store_22 opened in November 2022)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["unique_id,ds,y"]
    for i in range(STORES):
        months = STORE_MONTHS - 3 * (i % 5)
        stamps = pd.date_range(end="2023-12-01", periods=months, freq="MS")
        values = store_sales(i, months)
        rows += [f"store_{i:02d},{t:%Y-%m-%d},{v:.2f}" for t, v in zip(stamps, values, strict=True)]
    csv = folder / "stores_long.csv"
    csv.write_text("\n".join(rows) + "\n")
    request = {
        "series": [
            {"id": "store_21", "start": "2021-01-01", "values": store_sales(21, 36).tolist()},
            {"id": "store_22", "start": "2022-11-01", "values": store_sales(22, 14).tolist()},
        ],
        "horizon": 12,
    }
    body = folder / "stores_request.json"
    body.write_text(json.dumps(request))
    return csv, body


FIT_STORES = ((31, 240), (32, 216), (33, 180))  # (seed, months) of the fit example's three shops


def write_fit_example(folder: Path) -> tuple[Path, Path]:
    """The README's fit_forecast example, tracked in docs/examples so that it runs on a fresh clone
    against the shipped pretrained-monthly model (issue 45, item 11): `fit_request.json`, a /v1 body of
    three shops of 15 to 20 years up to December 2023 (long enough for the model's training windows,
    24 + 24 values, before their last fifth, whose windows calibrate 80% and 95% intervals), and
    `fit_series.csv`, the same shops long (unique_id, ds, y) for the client. tests/test_readme.py
    checks that the tracked files are what this writes."""
    folder.mkdir(parents=True, exist_ok=True)
    rows, series = ["unique_id,ds,y"], []
    for seed, months in FIT_STORES:
        stamps = pd.date_range(end="2023-12-01", periods=months, freq="MS")
        values = store_sales(seed, months)
        rows += [f"store_{seed},{t:%Y-%m-%d},{v:.2f}" for t, v in zip(stamps, values, strict=True)]
        series.append({"id": f"store_{seed}", "start": f"{stamps[0]:%Y-%m-%d}", "values": values.tolist()})
    csv = folder / "fit_series.csv"
    csv.write_text("\n".join(rows) + "\n")
    body = folder / "fit_request.json"
    body.write_text(json.dumps({"series": series, "horizon": 12, "level": [80, 95]}) + "\n")
    return body, csv


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
    folder: Annotated[
        Path,
        typer.Argument(help="where to write grid.csv, grid_request.json, sales.csv and the stores files"),
    ],
) -> None:
    """Write the synthetic grid-load CSV, a forecast request for it, the daily sales CSV, and the long
    file of monthly stores with a request for two stores it does not hold."""
    for path in (*write_example(folder), write_sales(folder), *write_stores(folder)):
        typer.echo(path)


if __name__ == "__main__":
    typer.run(main)
