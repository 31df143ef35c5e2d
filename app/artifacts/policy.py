"""A model's version policy: which of its version folders are served, as Triton's `version_policy`.

    <repository>/<model>/version_policy.json     one of:
        {"latest": 2}              the 2 highest versions
        {"all": true}              every version (the default, when there is no file)
        {"specific": [1, 3]}       exactly these

The file sits beside the version folders, so a policy travels with its model (as Triton's config.pbtxt
does) rather than in a global flag. A file that cannot be read or does not say one of these is the
model's error, reported like a missing folder; its served versions are left as they are.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, model_validator

POLICY_FILE = "version_policy.json"


class PolicyError(ValueError):
    """The version policy file is unreadable or says nothing valid."""


class VersionPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    latest: PositiveInt | None = None
    all: bool | None = None
    specific: tuple[PositiveInt, ...] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> VersionPolicy:
        given = [k for k in ("latest", "all", "specific") if getattr(self, k) is not None]
        if len(given) != 1 or self.all is False:
            raise ValueError('say exactly one of {"latest": N}, {"all": true} or {"specific": [..]}')
        return self

    def select(self, versions: list[int]) -> set[int]:
        """The versions, of those on disk, that this policy serves."""
        if self.latest is not None:
            return set(sorted(versions)[-self.latest :])
        if self.specific is not None:
            return set(versions) & set(self.specific)
        return set(versions)

    def describe(self) -> str:
        if self.latest is not None:
            return f"latest {self.latest}"
        if self.specific is not None:
            return f"specific {list(self.specific)}"
        return "all"


EVERY_VERSION = VersionPolicy(all=True)


def read_policy(model_folder: Path) -> VersionPolicy:
    """The model's policy (every version when it has no policy file)."""
    path = model_folder / POLICY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return EVERY_VERSION
    except OSError as exc:
        raise PolicyError(f"{POLICY_FILE} cannot be read ({exc.strerror})") from None
    try:
        return VersionPolicy.model_validate(json.loads(text))
    except (json.JSONDecodeError, ValidationError) as exc:
        reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise PolicyError(f"{POLICY_FILE} is not a version policy: {reason}") from None
