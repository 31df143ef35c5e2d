"""tests/export/test_covariates_served.py's shops (a daily panel with a future, a past, a static and a
calendar covariate) trained and exported into a repository, split as a forecast job sees them: each
shop's history ending H days before the file does, and its future covariates for those H days. What the
batch scorer's and the client's covariate tests serve and check against /v1."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from typer.testing import CliRunner

from tests.export.test_covariates_served import DAYS, H, write_shops
from tests.utils.once import built

NAME = "shops"
TRAIN_LOG = "train.log"  # what the train command printed, beside its run
SHORT = 10  # days of history of the shop that opened late (shop_5 when there are 6; the model reads 28)

__all__ = ["DAYS", "NAME", "SHORT", "TRAIN_LOG", "H", "Shops", "publish_shops", "v1_series"]


@dataclass(frozen=True)
class Shops:
    repository: Path
    history: pd.DataFrame  # unique_id, ds, y, promo, footfall, size: each shop's rows before its horizon
    future: pd.DataFrame  # unique_id, ds, promo: the H days after each shop's last row


def publish_shops(folder: Path, n: int = 6, short: bool = True, timezone: str | None = None) -> Shops:
    """`n` shops, a model trained on them (future promo, past footfall, static size, day-of-week
    calendar; H = 7, L = 28) and exported with intervals into `folder/repo` (what train printed in
    `folder/train.log`); with `short`, the last shop
    has only SHORT days of history; with `timezone`, the file's dates are read there (the model's zone).
    Trained once per process for each `n` and `timezone` (tests/utils/once.py), copied into `folder`."""
    built(("shops", n, timezone), folder, lambda into: _train_and_export(into, n, timezone))
    csv = folder / "shops.csv"
    frame = pd.read_csv(csv, parse_dates=["ds"])
    day = frame.groupby("unique_id").cumcount()
    late = frame["unique_id"] == f"shop_{n - 1}" if short else False
    history = frame[(day < DAYS - H) & (~late | (day >= DAYS - H - SHORT))]
    future = frame[day >= DAYS - H][["unique_id", "ds", "promo"]]
    return Shops(folder / "repo", history.reset_index(drop=True), future.reset_index(drop=True))


def _train_and_export(folder: Path, n: int, timezone: str | None) -> None:
    from export.global_models.cli import cli

    csv = folder / "shops.csv"
    write_shops(csv, n=n)
    train = ["train", "--data", str(csv), "--horizon", str(H), "--input-periods", "4", "--future", "promo"]
    train += ["--past", "footfall", "--static", "size", "--calendar", "dayofweek"]
    train += [] if timezone is None else ["--timezone", timezone]
    done = CliRunner().invoke(cli, [*train, "--out", str(folder / "run")])
    assert done.exit_code == 0, done.output
    (folder / TRAIN_LOG).write_text(done.output)
    export = ["export", "--model", str(folder / "run" / "model.json"), "--name", NAME, "--data", str(csv)]
    done = CliRunner().invoke(cli, [*export, "--repository", str(folder / "repo")])
    assert done.exit_code == 0, done.output


def v1_series(history: pd.DataFrame, future: pd.DataFrame) -> list[dict[str, Any]]:
    """/v1's `series` for every shop of `history` (its rows, footfall and size) with the promotions of
    `future` after it: what the batch scorer's and the client's answers are checked against."""
    series = []
    for sid, rows in history.sort_values(["unique_id", "ds"]).groupby("unique_id"):
        promo = future[future["unique_id"] == sid].sort_values("ds")["promo"]
        series.append(
            {
                "id": sid,
                "start": rows["ds"].iloc[0].isoformat(),
                "values": rows["y"].tolist(),
                "future": {"promo": promo.astype(float).tolist()},
                "past": {"footfall": rows["footfall"].tolist()},
                "static": {"size": rows["size"].iloc[0]},
            }
        )
    return series
