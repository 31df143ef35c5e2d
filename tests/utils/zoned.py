"""A global model trained on a naive local file of hourly Berlin series over the autumn change of
29 October 2023 (02:00 .. 02:59 twice) and published: what the batch scorer's and the client's tests of
the autumn repeat serve and check against /v1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from tests.utils.once import built

ZONE = "Europe/Berlin"
BERLIN = "berlin"  # the model's name
AUTUMN = "2023-10-29 02:00:00"  # the wall-clock time the autumn change repeats


def publish_global(
    folder: Path,
    frame: pd.DataFrame,
    name: str,
    h: int,
    zone: str | None = None,
    periods: int = 2,
    extra: tuple[str, ...] = (),
) -> Path:
    """A global model trained on `frame` (unique_id, ds, y, and any covariates `extra` names: train's
    further arguments) and exported into `folder/repo`."""
    from export.global_models.cli import cli

    csv = folder / f"{name}.csv"
    frame.to_csv(csv, index=False)
    # The read-out alone (--no-local): these models' premise is an input of exactly `periods` periods,
    # which the tests send; a hybrid also reads its local models' longer window.
    train = ["train", "--data", str(csv), "--horizon", str(h), "--input-periods", str(periods), "--no-local"]
    train += list(extra)
    train += [] if zone is None else ["--timezone", zone]
    done = CliRunner().invoke(cli, [*train, "--out", str(folder / "run")])
    assert done.exit_code == 0, done.output
    export = ["export", "--model", str(folder / "run" / "model.json"), "--name", name, "--data", str(csv)]
    done = CliRunner().invoke(cli, [*export, "--repository", str(folder / "repo")])
    assert done.exit_code == 0, done.output
    return folder / "repo"


def publish_berlin(folder: Path, heat: bool = False) -> tuple[Path, pd.DataFrame]:
    """Three hourly Berlin series (naive local times, in order: the repeat's hour twice), a model of them
    (L = 48, H = 12) in `folder/repo`; with `heat`, a future-known covariate `heat` (the day's heating,
    which the series follows) and the hour of day as a calendar covariate. (repository, the file)."""
    stamps = pd.date_range("2023-09-20", "2023-11-05 23:00", freq="h", tz=ZONE)  # instants, local labels
    local = stamps.strftime("%Y-%m-%d %H:%M:%S")
    assert (local == AUTUMN).sum() == 2
    frames = []
    for i in range(3):
        rng = np.random.default_rng(i)
        daily = 10 * np.sin(2 * np.pi * stamps.hour.to_numpy() / 24)  # by the local clock
        warm = np.repeat(rng.uniform(0, 8, len(stamps) // 24 + 1), 24)[: len(stamps)]
        y = 50 + 10 * i + daily + (4 * warm if heat else 0) + rng.standard_normal(len(stamps))
        part = pd.DataFrame({"unique_id": f"s{i}", "ds": local, "y": y.round(3)})
        frames.append(part.assign(heat=warm.round(3)) if heat else part)
    frame = pd.concat(frames, ignore_index=True)
    extra = ("--future", "heat", "--calendar", "hour") if heat else ()
    # Trained once per process for each `heat` (tests/utils/once.py), copied into `folder`.
    built(("berlin", heat), folder, lambda into: publish_global(into, frame, BERLIN, 12, ZONE, extra=extra))
    return folder / "repo", frame


def ending_in_the_repeat(frame: pd.DataFrame, which: dict[str, int], short: dict[str, int]) -> pd.DataFrame:
    """Each series of `which` cut after its first (0) or second (1) AUTUMN row; those in `short` keep only
    that many rows."""
    rows = []
    for sid, k in which.items():
        mine = frame[frame["unique_id"] == sid].reset_index(drop=True)
        at = int(np.flatnonzero(mine["ds"].to_numpy() == AUTUMN)[k])
        rows.append(mine.iloc[at + 1 - short.get(sid, at + 1) : at + 1])
    return pd.concat(rows, ignore_index=True)
