"""Published scores on the M3, Tourism and M1 tasks of Chronos Benchmark II, as fev reports them: a fixed
table, copied by hand from fev's result files (never fetched at run time), with where it came from.

fev (autogluon/fev) runs the 27 zero-shot tasks of the Chronos paper's Benchmark II; its
`benchmarks/chronos_zeroshot/results/<model>.csv` hold one row per task with MASE and WQL (fev 0.6.0:
one window, the last H values of every series; MASE per series with the in-sample seasonal-naive scale,
averaged over series; WQL over quantiles 0.1-0.9, 2·Σ pinball / Σ|y| over every series and step, then
averaged over the quantiles; the point forecast is the median). The tasks are `monash_m3_*`,
`monash_tourism_*` and `monash_m1_*` of `autogluon/chronos_datasets` (the Monash repository's copies of
the competitions' series, official horizons and cycles). fev has no task for M3 "other". The M1 rows
were read on 2026-12-07 from the same files (the stored copies searchable then, whose M3 rows equal the
ones read on 2026-12-03 to every digit).

Values rounded to 4 decimals. The statsforecast rows are fev's own runs of the same models this
benchmark fits (a check that our run reproduces them, not a published claim of ours).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FEV_COMMIT", "FEV_PATH", "FEV_REPO", "FEV_TASKS", "PUBLISHED", "SOURCE", "Published"]

FEV_REPO = "autogluon/fev"
FEV_COMMIT = "1bc95fd779b3bbfccd85c91178e56075d8fc2e45"  # HEAD of 2026-08-19; files last changed 2025-09-16
FEV_PATH = "benchmarks/chronos_zeroshot/results"
SOURCE = (
    f"{FEV_REPO}@{FEV_COMMIT[:7]} {FEV_PATH}/*.csv (fev 0.6.0), read 2026-12-03; the M1 rows read 2026-12-07 "
    "from the stored copies of the same files (commits aab1d0d, d389a2a, 7cb2529, 124cec8, 239d66e), whose "
    "M3 rows equal the ones read before"
)

# Our data set name -> fev's task name.
FEV_TASKS = {
    "M3 monthly": "monash_m3_monthly",
    "M3 quarterly": "monash_m3_quarterly",
    "M3 yearly": "monash_m3_yearly",
    "Tourism monthly": "monash_tourism_monthly",
    "Tourism quarterly": "monash_tourism_quarterly",
    "Tourism yearly": "monash_tourism_yearly",
    "M1 monthly": "monash_m1_monthly",
    "M1 quarterly": "monash_m1_quarterly",
    "M1 yearly": "monash_m1_yearly",
}


@dataclass(frozen=True)
class Published:
    """One model's published (MASE, WQL) per task, and the fev result file they were read from."""

    model: str
    file: str  # under FEV_PATH
    scores: dict[str, tuple[float, float]]  # data set -> (MASE, WQL)
    kind: str  # "foundation" (zero-shot) or "statsforecast" (fev's own run, per series)


_ORDER = (
    "M3 monthly",
    "M3 quarterly",
    "M3 yearly",
    "Tourism monthly",
    "Tourism quarterly",
    "Tourism yearly",
    "M1 monthly",
    "M1 quarterly",
    "M1 yearly",
)


def _row(model: str, file: str, kind: str, *pairs: tuple[float, float]) -> Published:
    return Published(model, file, dict(zip(_ORDER, pairs, strict=True)), kind)


# (MASE, WQL) in _ORDER: M3 monthly, quarterly, yearly; Tourism monthly, quarterly, yearly; M1 monthly,
# quarterly, yearly.
# fmt: off
PUBLISHED: tuple[Published, ...] = (
    _row("TimeCopilot", "timecopilot.csv", "foundation",
         (0.8286, 0.0901), (1.1839, 0.0712), (2.7591, 0.1250),
         (1.4292, 0.0791), (1.6223, 0.0598), (3.5747, 0.1580),
         (1.0536, 0.1333), (1.6959, 0.0991), (4.0281, 0.1401)),
    _row("TiRex", "tirex.csv", "foundation",
         (0.8308, 0.0899), (1.1542, 0.0699), (2.7099, 0.1264),
         (1.4488, 0.0749), (1.6060, 0.0592), (3.5264, 0.1561),
         (1.0604, 0.1323), (1.6740, 0.0996), (3.7032, 0.1312)),
    _row("TimesFM-2.0", "timesfm-2.0.csv", "foundation",
         (0.8321, 0.0887), (1.2018, 0.0753), (2.8216, 0.1439),
         (1.6224, 0.0850), (1.7985, 0.0700), (3.4940, 0.1627),
         (1.0519, 0.1299), (1.7111, 0.1128), (3.5960, 0.1448)),
    _row("Chronos-Bolt-base", "chronos_bolt_base.csv", "foundation",
         (0.8511, 0.0927), (1.2888, 0.0761), (2.9061, 0.1293),
         (1.5282, 0.0903), (1.7560, 0.0645), (3.6925, 0.1656),
         (1.0999, 0.1392), (1.7733, 0.1007), (4.4044, 0.1505)),
    _row("Chronos-T5-large", "chronos_large.csv", "foundation",
         (0.8527, 0.0946), (1.1834, 0.0731), (3.0655, 0.1469),
         (1.7640, 0.0953), (1.6561, 0.0671), (3.6488, 0.1698),
         (1.0935, 0.1302), (1.7186, 0.1027), (4.4024, 0.1851)),
    _row("SeasonalNaive", "seasonal_naive.csv", "statsforecast",
         (1.1462, 0.1485), (1.4253, 0.1013), (3.1717, 0.1665),
         (1.6309, 0.1042), (1.6990, 0.1194), (3.5520, 0.2092),
         (1.3145, 0.1915), (2.0775, 0.1495), (4.8943, 0.2093)),
    _row("AutoETS", "auto_ets.csv", "statsforecast",
         (0.8634, 0.0931), (1.1436, 0.0703), (2.6953, 0.1294),
         (1.5310, 0.1002), (1.5989, 0.0706), (3.1832, 0.1570),
         (1.0890, 0.1653), (1.6609, 0.0847), (3.9572, 0.1393)),
    _row("AutoTheta", "auto_theta.csv", "statsforecast",
         (0.8547, 0.0947), (1.1186, 0.0702), (2.6099, 0.1277),
         (1.6655, 0.0910), (1.6481, 0.0612), (2.9916, 0.1760),
         (1.0917, 0.1590), (1.6671, 0.0820), (3.6589, 0.1373)),
    _row("AutoARIMA", "auto_arima.csv", "statsforecast",
         (0.8755, 0.0981), (1.1917, 0.0765), (2.8896, 0.1558),
         (1.4829, 0.0909), (1.5969, 0.0997), (3.3464, 0.1289),
         (1.1137, 0.1544), (1.6885, 0.0883), (3.4858, 0.1328)),
)
# fmt: on
