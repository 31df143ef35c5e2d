"""Training, evaluation and ONNX export: the commands `python -m export.<command>` (docs/training.md,
docs/panels.md, docs/export.md).

Run as such a command (`sys.argv[0]` is "-m" while Python imports this package to find the module), a
module of the user install set that this environment lacks (after `scripts/setup.sh serve`: no pandas,
typer or torch) is said in one line naming the set and the command that installs it, instead of a
traceback ending in `No module named 'typer'` (issue 45, item 7). Imported as a library, nothing changes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType

# Modules of requirements/user.txt (train.txt's and Ray) that the service's own set lacks.
USER_SET_MODULES = frozenset(
    {"torch", "onnx", "onnxscript", "safetensors", "pandas", "pyarrow", "typer", "tqdm", "yaml", "ray"}
)


def missing_from_user_set(error: BaseException) -> str | None:
    """The one line to print for a module of the user set that is missing; None for anything else."""
    if not isinstance(error, ModuleNotFoundError):
        return None
    top = (error.name or "").split(".")[0]
    if top not in USER_SET_MODULES:
        return None
    return (
        f"error: this command needs {top!r}, which this environment lacks; it is in the user install set "
        "(training, export, the batch command and the client, without the test tools): "
        "`bash scripts/setup.sh user` at the repository root, or "
        "`pip install -r requirements/user.txt -c requirements/constraints.txt` into this environment"
    )


def _said_hook(
    kind: type[BaseException],
    error: BaseException,
    tb: TracebackType | None,
    previous: Callable[[type[BaseException], BaseException, TracebackType | None], object] = sys.excepthook,
) -> None:
    said = missing_from_user_set(error)
    if said is None:
        previous(kind, error, tb)
    else:
        sys.stderr.write(said + "\n")


if sys.argv[:1] == ["-m"]:  # `python -m export.<command>`: Python is locating the command's module
    sys.excepthook = _said_hook
