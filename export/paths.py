"""Paths in checkpoints and reports are stored relative to the repository root, so runs move with it."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def resolve(path: str | Path) -> Path:
    """An absolute path as is; a relative one against the repository root."""
    p = Path(path)
    return p if p.is_absolute() else REPO_ROOT / p


def portable(path: Path) -> str:
    """Relative to the repository root when inside it, else absolute."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path.resolve())
