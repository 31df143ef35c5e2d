"""How the suite is shared between pytest-xdist's workers (`pytest -n 2 --dist loadgroup`, what
scripts/test.sh and scripts/test-fast.sh run): which tests must run on one worker, and in which order the
groups are handed out.

- A test file is one group: its module fixtures (a trained model, a service process) are built once, on
  the worker that runs the file, never once per worker.
- The files of `TOGETHER` share one group and so one worker, one after the other: they start things that
  cannot run twice at once on one machine (a local Ray cluster and its fixed ports).
- The tests of the files of `SPLIT` are a group each: independent tests, each long, with no module fixture,
  which would otherwise keep one worker busy while the other has nothing left.
- Groups are handed out heaviest first (their measured seconds: tests/tiers.py), so that the last group to
  start is a short one and both workers finish at about the same time.

Without `-n` nothing changes: the tests run in their files' order, in one process.
"""

from __future__ import annotations

import re

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


def _path(item: pytest.Item) -> str:
    return item.nodeid.partition("::")[0]


def _function(item: pytest.Item) -> str:
    return re.sub(r"\[.*\]$", "", item.nodeid.rpartition("::")[2])


def group_of(item: pytest.Item) -> str:
    """The group an item runs in: its file's, the `TOGETHER` group its file is in, or its own."""
    path = _path(item)
    for name, files in TOGETHER.items():
        if path in files:
            return name
    if path in SPLIT:
        return re.sub(r"[\[\]@]", "_", item.nodeid)  # xdist reads a group after the nodeid's last "@"
    return path


def seconds(items: list[pytest.Item]) -> float:
    """The measured seconds of these items (tests/tiers.py): a whole file's or a function's (all its
    parameters together) counted once, QUICK_S for each item it does not name."""
    counted: set[str] = set()
    total = 0.0
    for item in items:
        path = _path(item)
        named = next((f for f in tiers.SLOW_FILES if path == f or path.startswith(f + "/")), None)
        mine = tiers.SLOW_TESTS.get(path, {})
        if named is not None:
            key, figure = named, tiers.SLOW_FILES[named]
        elif _function(item) in mine:
            key, figure = f"{path}::{_function(item)}", mine[_function(item)]
        else:
            key, figure = item.nodeid, QUICK_S
        if key not in counted:
            counted.add(key)
            total += figure
    return total


def arrange(items: list[pytest.Item]) -> None:
    """Mark each item with its group (`xdist_group`) and order the groups heaviest first, each group's
    items together in their own order."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(group_of(item), []).append(item)
    weight = {name: seconds(members) for name, members in groups.items()}
    order = sorted(groups, key=lambda name: -weight[name])  # stable: equal weights keep the files' order
    items[:] = [item for name in order for item in groups[name]]
    for name in order:
        for item in groups[name]:
            item.add_marker(pytest.mark.xdist_group(name))


def distributed(config: pytest.Config) -> bool:
    """Whether this run hands its tests to xdist's workers (or is one of them)."""
    return hasattr(config, "workerinput") or config.getoption("dist", "no") not in ("no", None)
