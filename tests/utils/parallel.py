"""How the suite is shared between pytest-xdist's workers (`pytest -n 2 --dist loadfile`, what
scripts/test.sh and scripts/test-fast.sh run): which tests must run on one worker, and in which order the
groups are handed out. tests/conftest.py gives xdist the `Scheduler` below in place of its own (xdist's
`xdist_group` marks do nothing under pytest 9.2: xdist 3.8 renames a node id pytest no longer reads).

- A test file is one group: its module fixtures (a trained model, a service process) are built once, on
  the worker that runs the file, never once per worker.
- The files of `TOGETHER` share one group and so one worker, one after the other: they start things that
  cannot run twice at once on one machine (a local Ray cluster and its fixed ports).
- The tests of the files of `SPLIT` are a group each: independent tests, each long, with no module fixture,
  which would otherwise keep one worker busy while the other has nothing left.
- Groups are handed out heaviest first (their measured seconds: tests/tiers.py), so that the last group to
  start is a short one and both workers finish at about the same time.
- Each test has a node id of its own (`unique_ids`: xdist runs one test of those sharing one).
- Each worker's thread pools (torch, OpenMP, BLAS) get its share of the CPUs (`share_cpus`).

Without `-n` only the ids are repaired: the tests run in their files' order, in one process, their threads
as they are.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import re
import sys
from typing import Any

import pytest

from tests import tiers

# Files whose tests start a local Ray (ray.init or `ray start`): one worker runs them, one after the other.
TOGETHER: dict[str, tuple[str, ...]] = {
    "ray": (
        "tests/batch/test_cluster.py",
        "tests/batch/test_fit.py",
        "tests/batch/test_loopback.py",
        "tests/batch/test_score.py",
        "tests/batch/test_score_covariates.py",
        "tests/batch/test_score_zones.py",
        "tests/batch/test_bad_input.py",
        "tests/bench/test_batch.py",
        "tests/test_user_workflow.py",
    ),
}
# Files whose tests may each run on either worker.
SPLIT = ("tests/bench/test_competitions.py",)
QUICK_S = 0.1  # a test tests/tiers.py does not name: under a second, most well under


def _path(nodeid: str) -> str:
    return nodeid.partition("::")[0]


def _function(nodeid: str) -> str:
    return re.sub(r"\[.*\]$", "", nodeid.rpartition("::")[2])


def group_of(nodeid: str) -> str:
    """The group a test runs in: its file's, the `TOGETHER` group its file is in, or its own."""
    path = _path(nodeid)
    for name, files in TOGETHER.items():
        if path in files:
            return name
    return nodeid if path in SPLIT else path


def seconds(nodeids: list[str]) -> float:
    """The measured seconds of these items (tests/tiers.py): a whole file's or a function's (all its
    parameters together) counted once, QUICK_S for each item it does not name."""
    counted: set[str] = set()
    total = 0.0
    for nodeid in nodeids:
        path, function = _path(nodeid), _function(nodeid)
        named = next((f for f in tiers.SLOW_FILES if path == f or path.startswith(f + "/")), None)
        mine = tiers.SLOW_TESTS.get(path, {})
        if named is not None:
            key, figure = named, tiers.SLOW_FILES[named]
        elif function in mine:
            key, figure = f"{path}::{function}", mine[function]
        else:
            key, figure = nodeid, QUICK_S
        if key not in counted:
            counted.add(key)
            total += figure
    return total


def unique_ids(items: list[pytest.Item]) -> None:
    """Give each item its own node id, as pytest before 9.2 did: xdist's workers report, and its
    controller schedules, by node id, so items sharing one collapse into a single test that runs once.

    Schemathesis 4.32 names its items `test[GET /path]` but passes the bare function name as the original
    name, from which pytest 9.2 builds the node id (`NodeId`: path, names, params), so all 30 operations of
    tests/app/test_schemathesis.py::test_openapi_fuzz had one id; under -n one of them ran. Such an item
    gets the bracket of its name as its id's parameters. Any other id still shared is a usage error."""
    for item in items:
        name, base = item.name, getattr(item, "originalname", item.name)
        bare = item.nodeid.rpartition("::")[2] == base
        if bare and name != base and name.startswith(base + "[") and name.endswith("]"):
            item._id = item._id.with_params(name[len(base) + 1 : -1])
    seen: dict[str, int] = {}
    for item in items:
        seen[item.nodeid] = seen.get(item.nodeid, 0) + 1
    shared = sorted(nodeid for nodeid, count in seen.items() if count > 1)
    if shared:
        raise pytest.UsageError(f"tests sharing a node id (xdist would run one of each): {shared[:5]}")


def arrange(items: list[pytest.Item]) -> None:
    """Order the groups heaviest first, each group's items together in their own order (xdist's workers
    collect, and its controller queues the groups in the order they were collected)."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(group_of(item.nodeid), []).append(item)
    weight = {name: seconds([i.nodeid for i in members]) for name, members in groups.items()}
    order = sorted(groups, key=lambda name: -weight[name])  # stable: equal weights keep the files' order
    items[:] = [item for name in order for item in groups[name]]


def distributed(config: pytest.Config) -> bool:
    """Whether this run hands its tests to xdist's workers (or is one of them)."""
    return hasattr(config, "workerinput") or config.getoption("dist", "no") not in ("no", None)


def scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduler (a whole group to one worker, the next group to whichever worker is nearly
    done), with `group_of` as the scope and the groups in their collected order."""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduler(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False  # xdist's own reorder puts the groups with most tests first
    return Scheduler(config, log)


# Thread pools that read these at start: OpenMP (torch's CPU kernels), OpenBLAS and MKL (numpy's, torch's).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def worker_threads(workers: int) -> int:
    """The CPUs of this process's affinity shared between `workers` workers (at least one each)."""
    return max(1, len(os.sched_getaffinity(0)) // max(1, workers))


def share_cpus(config: pytest.Config) -> None:
    """Under -n, so that the workers' thread pools do not oversubscribe the CPUs (two workers training
    with two torch threads each on two cores are slower than one process): on the controller, before it
    starts the workers, the thread variables of the workers' environment (and of the processes they
    start) default to each worker's share; in each worker, torch is held to that share on import, since
    the trainer sets its threads to the process's CPUs (export/train.py). Values the caller set are
    kept. Without -n nothing changes."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        cap_threads(worker_threads(int(workerinput["workercount"])))
    elif distributed(config) and (config.getoption("numprocesses", 0) or 0) > 0:
        threads = str(worker_threads(int(config.getoption("numprocesses"))))
        for variable in THREAD_VARIABLES:
            os.environ.setdefault(variable, threads)


def cap_threads(threads: int, module: str = "torch") -> None:
    """`torch.set_num_threads(n)` sets min(n, threads) in this process, now or when torch is imported
    (`module`: torch, or a stand-in of its two functions in the tests)."""

    def cap(torch: Any) -> None:
        if getattr(torch.set_num_threads, "capped_at", None) is not None:
            return
        original = torch.set_num_threads

        def set_num_threads(n: int) -> None:
            original(max(1, min(int(n), threads)))

        set_num_threads.capped_at = threads  # type: ignore[attr-defined]
        torch.set_num_threads = set_num_threads
        set_num_threads(torch.get_num_threads())

    if module in sys.modules:
        cap(sys.modules[module])
        return

    class OnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
            if fullname != module:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(module)
            if spec is None or spec.loader is None:
                return spec
            execute = spec.loader.exec_module

            def exec_module(loaded: Any) -> None:
                execute(loaded)
                cap(loaded)

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, OnImport())
