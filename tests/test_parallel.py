"""How the suite is shared between xdist's workers (tests/utils/parallel.py): the files it names exist, each
file's tests stay one group in their order, the Ray files one group, the split files' tests a group each,
and the heaviest groups go first."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests import tiers
from tests.utils import parallel

ROOT = Path(__file__).resolve().parents[1]


class Item:
    """What `arrange` reads of a pytest item: its node id."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


@pytest.mark.parametrize(
    "path", sorted({*parallel.SPLIT, *(f for g in parallel.TOGETHER.values() for f in g)})
)
def test_each_named_file_exists(path: str) -> None:
    assert (ROOT / path).is_file(), f"tests/utils/parallel.py names {path}, which is gone: remove it there"


def test_groups_stay_together_in_their_order_heaviest_first() -> None:
    slow_file = next(
        iter(f for f in tiers.SLOW_FILES if f.endswith(".py") and f not in parallel.TOGETHER["ray"])
    )
    ray_a, ray_b = parallel.TOGETHER["ray"][:2]
    split = parallel.SPLIT[0]
    heavy, light = sorted(tiers.SLOW_TESTS[split], key=lambda name: -tiers.SLOW_TESTS[split][name])[:2]
    nodeids = [
        "tests/quick_a.py::test_one",
        f"{ray_a}::test_x",
        f"{split}::{light}",
        f"{slow_file}::test_one[1]",
        "tests/quick_a.py::test_two",
        f"{ray_b}::test_y",
        f"{split}::{heavy}",
        f"{slow_file}::test_one[2]",
    ]
    items = [Item(n) for n in nodeids]
    parallel.arrange(items)  # type: ignore[arg-type]  # duck-typed items: a node id
    got = [i.nodeid for i in items]
    groups = [parallel.group_of(n) for n in got]
    assert sorted(got) == sorted(nodeids)
    # Each group's items next to each other, in the order they were collected.
    seen: list[str] = []
    for g in groups:
        if not seen or seen[-1] != g:
            assert g not in seen, f"group {g} split in two: {got}"
            seen.append(g)
    assert got.index("tests/quick_a.py::test_one") < got.index("tests/quick_a.py::test_two")
    assert got.index(f"{slow_file}::test_one[1]") < got.index(f"{slow_file}::test_one[2]")
    assert groups[got.index(f"{ray_a}::test_x")] == groups[got.index(f"{ray_b}::test_y")] == "ray"
    assert groups[got.index(f"{split}::{heavy}")] != groups[got.index(f"{split}::{light}")]
    # Heaviest first: the groups' measured seconds never grow along the run; the quick file last.
    weights = [parallel.seconds([n for n in got if parallel.group_of(n) == g]) for g in seen]
    assert weights == sorted(weights, reverse=True)
    assert seen[-1] == "tests/quick_a.py" and weights[-1] == pytest.approx(2 * parallel.QUICK_S)


def test_xdist_is_given_the_groups_as_its_scopes() -> None:
    """The scheduler tests/conftest.py hands xdist sends a group to one worker: its scope is the group."""
    pytest.importorskip("xdist")
    config = Config()
    sched = parallel.scheduler(config, None)  # type: ignore[arg-type]
    ray_a, ray_b = parallel.TOGETHER["ray"][:2]
    assert sched._split_scope(f"{ray_a}::test_x") == sched._split_scope(f"{ray_b}::test_y[1]") == "ray"
    assert sched._split_scope("tests/app/test_x.py::test_a[1]") == "tests/app/test_x.py"
    split = f"{parallel.SPLIT[0]}::test_z"
    assert sched._split_scope(split) == split
    assert config.option.loadscopereorder is False  # the collected (heaviest-first) order kept


class Config:
    """What xdist's scheduler reads of pytest's config at construction."""

    class option:  # noqa: N801
        loadscopereorder = True
        maxschedchunk = None

    def getvalue(self, name: str) -> object:
        return {"tx": ["popen", "popen"], "numprocesses": 2}.get(name)


class Named:
    """What `unique_ids` reads and writes of a pytest item: its name, original name and node id."""

    def __init__(self, nodeid: str, name: str, originalname: str) -> None:
        from _pytest.nodeid import NodeId

        self._id = NodeId.parse(nodeid)
        self.name, self.originalname = name, originalname

    @property
    def nodeid(self) -> str:
        return str(self._id)


def test_items_named_apart_get_ids_apart_and_a_shared_id_is_refused() -> None:
    """Schemathesis's items (name `test[GET /a]`, original name `test`) all had the id `f.py::test` under
    pytest 9.2, and xdist ran one of them: each gets its name's bracket back; ids still shared fail."""
    items = [
        Named("tests/f.py::test_fuzz", "test_fuzz[GET /a]", "test_fuzz"),
        Named("tests/f.py::test_fuzz", "test_fuzz[POST /b/{name}]", "test_fuzz"),
        Named("tests/f.py::test_p[1]", "test_p[1]", "test_p"),
        Named("tests/f.py::test_plain", "test_plain", "test_plain"),
    ]
    parallel.unique_ids(items)  # type: ignore[arg-type]  # duck-typed items
    assert [i.nodeid for i in items] == [
        "tests/f.py::test_fuzz[GET /a]",
        "tests/f.py::test_fuzz[POST /b/{name}]",
        "tests/f.py::test_p[1]",
        "tests/f.py::test_plain",
    ]
    twice = [Named("tests/f.py::test_plain", "test_plain", "test_plain") for _ in range(2)]
    with pytest.raises(pytest.UsageError, match="sharing a node id"):
        parallel.unique_ids(twice)  # type: ignore[arg-type]


def test_worker_threads_share_the_cpus() -> None:
    cpus = len(os.sched_getaffinity(0))
    assert parallel.worker_threads(1) == cpus
    assert parallel.worker_threads(2) == max(1, cpus // 2)
    assert parallel.worker_threads(10 * cpus) == 1


def test_the_cap_holds_set_num_threads_now_or_on_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in of torch's two functions, imported after the cap is set (as a worker imports torch while
    collecting), and one already imported: a request above the share gets the share, below it is kept."""
    (tmp_path / "fake_torch_threads.py").write_text(
        "threads = 4\n"
        "def get_num_threads():\n    return threads\n"
        "def set_num_threads(n):\n    global threads\n    threads = n\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_torch_threads", raising=False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    parallel.cap_threads(2, module="fake_torch_threads")
    import fake_torch_threads as fake  # type: ignore[import-not-found]

    assert fake.get_num_threads() == 2  # the 4 it started with, capped on import
    fake.set_num_threads(8)
    assert fake.get_num_threads() == 2
    fake.set_num_threads(1)
    assert fake.get_num_threads() == 1
    parallel.cap_threads(1, module="fake_torch_threads")  # already capped: kept as it is
    fake.set_num_threads(8)
    assert fake.get_num_threads() == 2
