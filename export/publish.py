"""Publishing a version folder into a model repository: app/artifacts/publish.py, the one path every
writer of versions uses (the service's fit on request too), re-exported under its old name."""

from __future__ import annotations

from app.artifacts.publish import (
    VersionExistsError,
    check_version,
    is_version_folder,
    next_version,
    publish_version,
)

__all__ = ["VersionExistsError", "check_version", "is_version_folder", "next_version", "publish_version"]
