"""Which config for your own data: every recipe on the two example files, side by side.

    python -m export.recipes                     # writes results/own-data/report.json, prints the table

The files are export/example_data.py's (generated, seeded): `grid.csv` (2,000 hourly rows of grid load
and temperature, H = 24) and `sales.csv` (three years of a shop's daily sales, closed days filled with 0,
H = 28). Each recipe trains once on each (seed 0, one thread) with the same split (chronological
70/10/20), horizon and read options; its input length is its own (96 for the defaults and
configs/etth1-rsa.yaml, 512 for the configs/etth1-rem-readout*.yaml, chosen on validation among 96-512 for
configs/own-data.yaml). Reported: test MSE and MAE on the standardised scale over every test window
(the same windows for every recipe: they end on the same rows whatever L), validation MSE, the naive
references and the wall time. One seed: a difference of a few percent is within what another seed
might give.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from export.example_data import write_example, write_sales
from export.paths import REPO_ROOT, resolve
from export.reports import RecipeRow, RecipesRun, TrainingReport, read_report, write_report
from export.train import OWN_DATA_CONFIG, load_config, train

__all__ = ["RECIPES", "compare"]

# (label, config file or None for the TrainConfig defaults: what `export.train --data` used before
# configs/own-data.yaml)
RECIPES: tuple[tuple[str, Path | None], ...] = (
    ("defaults (no config, before issue 25)", None),
    ("configs/etth1-rsa.yaml", REPO_ROOT / "configs" / "etth1-rsa.yaml"),
    ("configs/etth1-rem-readout-trained.yaml", REPO_ROOT / "configs" / "etth1-rem-readout-trained.yaml"),
    ("configs/etth1-rem-readout.yaml (the shipped model)", REPO_ROOT / "configs" / "etth1-rem-readout.yaml"),
    ("configs/own-data.yaml (the default now)", OWN_DATA_CONFIG),
)


def _files(folder: Path) -> dict[str, tuple[Path, list[str]]]:
    grid, _ = write_example(folder)
    sales = write_sales(folder)
    return {
        "grid (hourly, H = 24)": (
            grid,
            ["timestamp_column=when", 'drop=["site"]', "fill=linear", "model.horizon=24"],
        ),
        "sales (daily, H = 28)": (sales, ["fill=zero", "model.horizon=28"]),
    }


def compare(out: Path) -> RecipesRun:
    """Train every recipe on every example file; write and return the report."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for data_label, (csv, options) in _files(folder / "data").items():
            for k, (label, config) in enumerate(RECIPES):
                overrides = [
                    f"data={csv}",
                    f"out={folder / 'runs'}",
                    f"name={csv.stem}-{k}",
                    "target=auto",
                    "mode=M",
                    "threads=1",
                    "seed=0",
                    "progress=false",
                    *options,
                ]
                report = read_report(train(load_config(config, overrides)) / "report.json", TrainingReport)
                rows.append(
                    RecipeRow(
                        data=data_label,
                        recipe=label,
                        input_length=report.model_config.input_length,
                        input_length_search=report.input_length_search,
                        val_mse=report.val.mse,
                        test_mse=report.test.mse,
                        test_mae=report.test.mae,
                        naive=report.naive,
                        windows=report.windows,
                        wall_time_s=report.wall_time_s,
                    )
                )
    result = RecipesRun(
        command="python -m export.recipes",
        protocol="seed 0, one thread; chronological 70/10/20 split; MSE/MAE on standardised values over "
        "every test window (the same windows for every recipe)",
        rows=rows,
    )
    write_report(out / "report.json", result, indent=1)
    return result


def table(result: RecipesRun) -> list[str]:
    """The comparison as a markdown table (what the README shows)."""
    lines = [
        "| data | recipe | L | test MSE | val MSE | last value | seasonal naive | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result.rows:
        assert r.naive is not None  # every recipe's run scores the naive references
        seasonal = r.naive.seasonal_naive
        lines.append(
            f"| {r.data} | {r.recipe} | {r.input_length} | {r.test_mse:.4f} | "
            f"{r.val_mse:.4f} | {r.naive.last_value.mse:.4f} | "
            f"{seasonal.mse:.4f} (P = {seasonal.period}) | {r.wall_time_s:.0f} |"
        )
    return lines


def main(
    out: Annotated[Path, typer.Option(help="where report.json goes")] = Path("results/own-data"),
) -> None:
    """Every recipe on the example files: which config for your own data."""
    result = compare(resolve(out))
    for line in table(result):
        typer.echo(line)


if __name__ == "__main__":
    typer.run(main)
