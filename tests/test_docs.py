"""Pages that must stay true to the tree (issue 44, item 6): every picture under results/ is shown by a
page, and the client's README documents the calls the client has, with their parameters and defaults."""

from __future__ import annotations

import ast
import inspect
import os
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from rsa_client import Client

ROOT = Path(__file__).resolve().parents[1]
# Folders that hold no page of ours.
NOT_PAGES = {".git", ".venv", "node_modules", "__pycache__"}
# A link to a picture: inline `[..](path.png)` / `![..](path.png "title")`, a reference `[x]: path.png`,
# or HTML `<img src="path.png">`.
PICTURE_LINK = re.compile(
    r"""\]\(\s*<?([^)\s>]+?\.png)(?:#[^)\s>]*)?>?(?:\s+"[^"]*")?\s*\)"""
    r"""|^\s*\[[^\]]+\]:\s*<?(\S+?\.png)>?"""
    r"""|<img\b[^>]*\bsrc=["']([^"']+?\.png)["']""",
    flags=re.M | re.I,
)
# Forecast plots of training runs that no page links today: each run's report.json names its plot
# ("plot": "forecast.png", export/train.py) and docs/training.md describes the file, so issue 44 kept them
# rather than delete them. Pattern -> how many today: a new unlinked picture fails, and so does a count
# that has changed (lower it when some are removed or linked), so the list only shrinks.
UNLINKED_TODAY = {
    "results/rem-readout/*/forecast.png": 24,
    "results/rem-readout-trained/*/forecast.png": 36,
    "results/runs/*/forecast.png": 31,
    "results/tuning/*/forecast.png": 39,
}


def pages() -> Iterator[Path]:
    """Every markdown file of the repository (its tools' folders aside)."""
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in NOT_PAGES and not d.startswith(".")]
        for name in files:
            if name.endswith(".md"):
                yield Path(folder) / name


def linked_pictures(page: Path, root: Path = ROOT) -> set[str]:
    """The pictures `page` links, as paths from `root` (a link that starts with `/` is from the root)."""
    here = page.parent.relative_to(root).as_posix()
    found = set()
    for match in PICTURE_LINK.finditer(page.read_text(encoding="utf-8")):
        target = next(g for g in match.groups() if g)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I):
            continue  # a URL
        path = target.lstrip("/") if target.startswith("/") else posixpath.join(here, target)
        found.add(posixpath.normpath(path))
    return found


def unlinked_pictures() -> list[str]:
    linked = set().union(*(linked_pictures(page) for page in pages()))
    shown = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "results").rglob("*.png"))
    return [p for p in shown if p not in linked]


def test_the_link_reader_finds_every_link_form(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text(
        '![a](../results/a.png) [b](<../results/b.png>) ![c](../results/c.png "title")\n'
        '[d]: /results/d.png\n<img alt="e" src="../results/e.png">\n![f](https://example.com/f.png)\n'
        "[g](../results/g.pngx) ![h](../results/h.png#dark)\n"
    )
    found = linked_pictures(page, tmp_path)
    assert found == {f"results/{x}.png" for x in "abcdeh"}


def test_the_interval_plots_are_found_linked() -> None:
    """The reader is not vacuous: docs/results.md shows the three interval evaluations' bands."""
    linked = linked_pictures(ROOT / "docs" / "results.md")
    for version in (3, 4, 5):
        assert f"results/intervals/etth1-rsa-v{version}/bands.png" in linked


def test_every_picture_under_results_is_linked_from_a_page() -> None:
    unlinked = unlinked_pictures()
    excused = {
        pattern: [p for p in unlinked if PurePosixPath(p).match(pattern)] for pattern in UNLINKED_TODAY
    }
    new = [p for p in unlinked if not any(p in paths for paths in excused.values())]
    assert new == [], f"pictures under results/ that no page links (link them, or do not commit them): {new}"
    counts = {pattern: len(paths) for pattern, paths in excused.items()}
    assert counts == UNLINKED_TODAY, "fewer (or more) unlinked run plots than UNLINKED_TODAY says: update it"


def _documented(text: str) -> list[tuple[str, str]]:
    """(name, parameters) of each call the README writes out as a signature: `name(a, b=1, *, c=None)`."""
    calls = re.findall(r"`(?:Client\(url\)\.)?(\w+)\(([^`]*?)\)`", " ".join(text.split()))
    return [(name, params) for name, params in calls if "=" in params or params.startswith("url")]


def test_the_client_readme_documents_the_calls_the_client_has() -> None:
    """client/README.md's signatures (`Client(url, *, api_key=None, ...)`, `forecast(df, h=None, ...)`)
    are the client's: the same parameters, in order, with the same defaults."""
    text = (ROOT / "client" / "README.md").read_text(encoding="utf-8")
    documented = _documented(text)
    names = {name for name, _ in documented}
    assert {"Client", "forecast", "cross_validation", "detect_anomalies", "fit_forecast"} <= names
    for name, params in documented:
        function = Client.__init__ if name == "Client" else getattr(Client, name)
        have = [p for p in inspect.signature(function).parameters.values() if p.name != "self"]
        written = ast.parse(f"def f({params}): pass").body[0].args  # type: ignore[attr-defined]
        positional = [a.arg for a in written.args]
        keyword = [a.arg for a in written.kwonlyargs]
        assert positional + keyword == [p.name for p in have], name
        assert keyword == [p.name for p in have if p.kind is p.KEYWORD_ONLY], name
        given = positional[len(positional) - len(written.defaults) :]
        defaults = dict(zip(given, written.defaults, strict=True))
        kw = zip(written.kwonlyargs, written.kw_defaults, strict=True)
        defaults |= {a.arg: d for a, d in kw if d is not None}
        for param in have:
            if param.name in defaults:
                assert ast.literal_eval(defaults[param.name]) == param.default, (name, param.name)
            else:
                assert param.default is param.empty, (name, param.name, "its default is not written")
