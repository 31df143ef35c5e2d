"""The flags every benchmark shares: `--smoke` (tiny sizes, for the tests, flags given with it still win),
`--device`, comma-separated integer lists."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def bench_parser(prog: str, doc: str | None, smoke: Sequence[str] = ()) -> argparse.ArgumentParser:
    """A parser whose help is the module's docstring, with `--smoke` (its sizes named when given)."""
    ap = argparse.ArgumentParser(
        prog=f"python -m {prog}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    detail = f": {' '.join(smoke)}" if smoke else ""
    ap.add_argument("--smoke", action="store_true", help=f"tiny sizes (the tests){detail}")
    return ap


def add_device_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="the ONNX Runtime provider (cuda: CUDAExecutionProvider, an error if it cannot run)",
    )


def ints(text: str) -> tuple[int, ...]:
    """A comma-separated list of integers (argparse type)."""
    return tuple(int(x) for x in text.split(",") if x)


def parse_with_smoke(
    ap: argparse.ArgumentParser, argv: Sequence[str] | None, smoke: Sequence[str]
) -> argparse.Namespace:
    """`--smoke` puts the tiny sizes `smoke` first, so that flags given with it still win."""
    given = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(given)
    return ap.parse_args([*smoke, *given]) if args.smoke else args


# -- this bench -------------------------------------------------------------------------------------------
# The smoke run compares freshly initialised weights (`--train-windows 0`): training, with its least-squares
# read-out and evaluations over whole splits, took ~115 of its ~130 s, and parity and speed do not depend
# on what the weights learned. It runs version 4's architecture: the same kind as the default (REM heads
# read at the last step), 36 heads instead of 87, so the export's calibration pass costs a third as much.
