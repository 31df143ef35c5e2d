"""`python -m batch score ...`: forecast a whole table; `python -m batch fit ...`: the global read-out
fitted on Ray Data (docs/batch.md)."""

from __future__ import annotations

import argparse
import sys

from batch.progress import Progress, rate_text
from batch.stderr import without_lines

# The user's install set (training, export, the batch command and the client, without the test tools):
# what a missing optional dependency's message names (requirements/user.txt, README "Your own data").
USER_SET = "bash scripts/setup.sh user"
USER_PIP = "pip install -r requirements/user.txt -c requirements/constraints.txt"


def missing_dependency(error: ModuleNotFoundError) -> str | None:
    """What to say when a module of the user set is missing (Ray, after `scripts/setup.sh train` or
    `serve`): the module, the set that has it and the command that installs it; None for any other."""
    top = (error.name or "").split(".")[0]
    if top not in ("ray", "pyarrow", "pandas", "torch", "onnx", "typer", "httpx"):
        return None
    return (
        f"python -m batch needs {top!r}, which this environment lacks; it is in the user install set "
        f"(training, export, the batch command and the client, without the test tools): `{USER_SET}` "
        f"at the repository root, or `{USER_PIP}` into this environment"
    )


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except ModuleNotFoundError as e:  # `import ray` where only the train or serve set is installed
        said = missing_dependency(e)
        if said is None:
            raise
        sys.stderr.write(f"error: {said}\n")
        return 2


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "fit":
        _fit(args)
    if args.command == "score":
        return _score(args)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m batch", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="forecast every series of a long table (CSV or Parquet)")
    score.add_argument("--model-repository", required=True, help="the service's model repository folder")
    score.add_argument("--model", required=True)
    score.add_argument("--version", type=int, default=None, help="default: the latest published version")
    score.add_argument("--input", required=True, help="a file, a folder of part files, or a pyarrow URL")
    score.add_argument("--output", required=True, help="a folder (or URL): one Parquet part per input part")
    score.add_argument(
        "--future",
        default=None,
        help="a covariate model's future-known covariates: a long table (file, folder or URL) of id, time "
        "and one column per future covariate, the model's H steps after each series' last timestamp",
    )
    score.add_argument("--horizon", type=int, default=None, help="default: the model's horizon")
    score.add_argument("--level", type=float, action="append", default=[], help="an interval level, %%")
    score.add_argument("--id-column", default="unique_id")
    score.add_argument("--time-column", default="ds")
    score.add_argument(
        "--target-column",
        default=None,
        help="a one-channel model's target column (default: its channel, or y)",
    )
    score.add_argument("--address", default=None, help="an existing Ray cluster (default: a local Ray)")
    score.add_argument("--actors", type=int, default=1, help="sessions scoring side by side")
    score.add_argument("--cpus-per-actor", type=float, default=1.0)
    score.add_argument("--gpus-per-actor", type=float, default=0.0, help="> 0: each session on CUDA")
    score.add_argument("--threads", type=int, default=None, help="intra-op threads per session")
    score.add_argument("--batch-rows", type=int, default=64, help="windows per session call")
    score.add_argument("--num-cpus", type=int, default=None, help="the local Ray's CPUs")
    score.add_argument("--object-store-mb", type=int, default=None, help="the local Ray's object store")
    fit = commands.add_parser(
        "fit", help="fit the global REM read-out (export/global_models/model.py) on Ray Data"
    )
    fit.add_argument("--input", required=True, help="long parts (id, time, y), each holding whole series")
    fit.add_argument("--horizon", type=int, required=True)
    fit.add_argument("--period", type=int, required=True, help="the seasonal cycle in steps (12: monthly)")
    fit.add_argument("--input-periods", type=int, required=True, help="the input length in periods")
    fit.add_argument("--irls", type=int, default=3, help="reweighted passes (each reads the table again)")
    fit.add_argument("--out", required=True, help="the model's JSON file (export.panel's format)")
    fit.add_argument("--address", default=None, help="an existing Ray cluster (default: a local Ray)")
    fit.add_argument("--num-cpus", type=int, default=None, help="the local Ray's CPUs")
    return parser


def _fit(args: argparse.Namespace) -> None:
    """`python -m batch fit`: the global read-out fitted on Ray Data, saved as export.panel saves it."""
    from pathlib import Path

    import ray

    from batch.fit import fit_dataset, table_dataset
    from export.global_models.config import PanelConfig

    cfg = PanelConfig(
        horizon=args.horizon, period=args.period, input_periods=args.input_periods, irls=args.irls
    )
    length = args.input_periods * args.period if args.period > 1 else 4 * args.input_periods
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        from batch.score import init_local_ray

        init_local_ray(num_cpus=args.num_cpus)  # loopback only, a token of its own
    try:
        with without_lines():  # Ray's error-level line of every actor pool (batch/stderr.py)
            model = fit_dataset(table_dataset(args.input), cfg, length)
    finally:
        ray.shutdown()
    path = model.save(Path(args.out))
    sys.stdout.write(f"fitted L = {length} in {model.fit_seconds:.1f} s: {path}\n")


def _score(args: argparse.Namespace) -> int:
    """`python -m batch score`: every input part scored on Ray Data; 2 for a model it cannot score."""
    from batch.score import Job, run

    job = Job(
        repository=args.model_repository,
        model=args.model,
        version=args.version,
        horizon=args.horizon,
        levels=tuple(args.level),
        id_col=args.id_column,
        time_col=args.time_column,
        target_col=args.target_column,
        batch_rows=args.batch_rows,
        threads=args.threads,
        future=args.future,
    )
    progress = Progress()  # a bar on a terminal: asked before standard error goes through the filter
    try:
        with without_lines():  # Ray's error-level line of every actor pool (batch/stderr.py)
            summary = run(
                job,
                args.input,
                args.output,
                address=args.address,
                actors=args.actors,
                cpus_per_actor=args.cpus_per_actor,
                gpus_per_actor=args.gpus_per_actor,
                num_cpus=args.num_cpus,
                object_store_bytes=None if args.object_store_mb is None else args.object_store_mb * 2**20,
                progress=progress,
            )
    except (FileNotFoundError, ValueError) as e:  # no such model or version; a model it cannot score
        sys.stderr.write(f"error: {e}\n")
        return 2
    if summary.unread:  # said, as the client's warning says it (rsa_client.series.unread_columns)
        sys.stderr.write(
            f"note: columns {summary.unread} are not read: neither the id, the time, the target nor a "
            f"covariate of model {args.model}\n"
        )
    rate = rate_text(summary.series, summary.seconds)
    sys.stdout.write(
        f"scored {summary.series:,} series in {_count(summary.parts - summary.skipped, 'part')} "
        f"({summary.skipped} already done) in {summary.seconds:.1f} s, {rate} series/s, "
        f"on {', '.join(sorted(summary.providers)) or 'nothing'}, {len(summary.nodes)} node(s): "
        f"{args.output}\n"
    )
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


if __name__ == "__main__":
    sys.exit(main())
