"""Read-out sweeps: variants of a last-step config compared by their refitted read-outs, in closed form.

    python -m export.sweep configs/sweeps/etth1-banks.yaml [--only NAME ...]

A sweep file names a training config, the data, horizons and seeds, a reference variant and the
variants, each a list of `--set` overrides and the read-out modes to fit (export/readout.py). For every
(variant, horizon, seed) the model is built exactly as `export.train` builds it (same seed, same
untrained weights, same cycle) and its read-out refitted per mode: validation MSE on every window and
per rolling origin, and test MSE (reported, never used to choose). Rows go to the sweep's `out` JSON as
they finish, and a rerun skips the rows already there (with the same overrides), so an interrupted
sweep resumes. docs/results.md shows every sweep, each variant against the reference by
`export.results.chosen`'s rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import torch
import typer
import yaml

from export.paths import portable, resolve
from export.readout import MODES, readout_report
from export.reports import SweepRow, SweepRun, build, read_report, write_report
from export.train import load_config, prepare, untrained

__all__ = ["load_sweep", "run_sweep"]


def load_sweep(path: Path) -> dict[str, Any]:
    """The sweep file, checked: every key known, every mode one of export.readout's."""
    spec = yaml.safe_load(path.read_text()) or {}
    need = {"config", "horizons", "seeds", "reference", "variants", "out"}
    known = need | {"description", "data", "threads"}
    if missing := need - set(spec):
        raise ValueError(f"{path}: missing {sorted(missing)}")
    if unknown := set(spec) - known:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
    if spec["reference"] not in spec["variants"]:
        raise ValueError(f"{path}: reference {spec['reference']!r} is not one of the variants")
    for name, v in spec["variants"].items():
        if unknown := set(v) - {"set", "modes", "description"}:
            raise ValueError(f"{path}: variant {name}: unknown keys {sorted(unknown)}")
        if bad := set(v.get("modes", ["model"])) - set(MODES):
            raise ValueError(f"{path}: variant {name}: unknown modes {sorted(bad)}; known: {list(MODES)}")
    return spec


def run_sweep(path: Path, only: list[str] | None = None, echo: Callable[[str], object] = print) -> Path:
    """Run the sweep's missing rows; returns its JSON file."""
    spec = load_sweep(path)
    out = resolve(spec["out"])
    done = read_report(out, SweepRun).rows if out.exists() else []
    rows = [
        r
        for r in done
        if r.variant in spec["variants"] and r.set == spec["variants"][r.variant].get("set", [])
    ]
    have = {(r.variant, r.horizon, r.seed, r.mode) for r in rows}
    torch.set_num_threads(int(spec.get("threads", 1)))
    for name, variant in spec["variants"].items():
        if only and name not in only:
            continue
        overrides = list(variant.get("set", []))
        modes = tuple(m for m in variant.get("modes", ["model"]))
        for h in spec["horizons"]:
            for seed in spec["seeds"]:
                todo = tuple(m for m in modes if (name, h, seed, m) not in have)
                if not todo:
                    continue
                base = [f"model.horizon={h}", f"seed={seed}", "progress=false"]
                if spec.get("data"):
                    base.append(f"data={spec['data']}")
                cfg = load_config(resolve(spec["config"]), [*base, *overrides])
                t0 = time.perf_counter()
                cfg, ds, _ = prepare(cfg)
                model = untrained(cfg, ds)
                ridge = {m: cfg.ridge if m == "window" else cfg.readout_ridge for m in todo}
                for mode in todo:
                    r = readout_report(model, ds, ridge[mode], (mode,))[mode]
                    rows.append(
                        build(
                            SweepRow,
                            {
                                "variant": name,
                                "horizon": h,
                                "seed": seed,
                                "mode": mode,
                                "set": overrides,
                                "heads": model.cfg.n_heads,
                                **r,
                                "seconds": time.perf_counter() - t0,
                            },
                        )
                    )
                    t0 = time.perf_counter()
                    echo(
                        f"{name} h{h} s{seed} {mode}: val {r['val_mse']:.4f} "
                        f"origins {r['val_origins_mean']:.4f} test {r['test_mse']:.4f}"
                    )
                    write_report(out, SweepRun(portable(resolve(path)), spec, rows), indent=1)
    return out


def main(
    sweep: Annotated[Path, typer.Argument(help="sweep file (configs/sweeps/*.yaml)")],
    only: Annotated[list[str] | None, typer.Option(help="run only this variant (repeatable)")] = None,
) -> None:
    """Refit the read-out of every variant of a sweep and write its JSON report."""
    out = run_sweep(resolve(sweep), only, echo=typer.echo)
    typer.echo(f"wrote {portable(out)}")


if __name__ == "__main__":
    typer.run(main)
