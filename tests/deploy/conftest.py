"""Shared helpers of the deployment tests: system tools that `scripts/ci-tools.sh` installs."""

from __future__ import annotations

import os
import shutil

import pytest


def need_tool(name: str, how: str = "scripts/ci-tools.sh installs it as root") -> str:
    """The tool's path; a missing tool skips the test, except under CI, where it is a failure."""
    # /usr/sbin (haproxy) is on root's PATH, not always on a user's.
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path is None:
        message = f"{name} is not installed ({how})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
