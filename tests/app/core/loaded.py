"""Run in the parse process by tests/app/core/test_offload.py: a probe that imports nothing of the app
itself (the test module would, and so could not tell what the worker imported at start)."""

from __future__ import annotations

import sys


def loaded(module: str) -> bool:
    return module in sys.modules
