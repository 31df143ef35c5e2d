"""API keys on their own: parsing, the constant-time check, the secret file."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.errors import PermissionDenied, Unauthenticated
from app.core.security import ApiKeys


def test_no_key_configured_lets_everything_through() -> None:
    keys = ApiKeys([])
    assert not keys.enabled
    keys.check(None)
    keys.check("Bearer anything")


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer   ", "Basic abc", "abc"])
def test_missing_credentials_are_unauthenticated(header: str | None) -> None:
    with pytest.raises(Unauthenticated):
        ApiKeys(["k1"]).check(header)


def test_wrong_key_is_denied_and_right_ones_pass() -> None:
    keys = ApiKeys(["k1", "second-key"])
    keys.check("Bearer k1")
    keys.check("bearer second-key")  # the scheme is case-insensitive (RFC 7235)
    for wrong in ("Bearer k2", "Bearer k1x", "Bearer K1", "Bearer " + "k" * 1000):
        with pytest.raises(PermissionDenied):
            keys.check(wrong)


def test_keys_file_and_its_errors(tmp_path: Path) -> None:
    secret = tmp_path / "keys"
    secret.write_text("# rotated 2026-11\nfrom-file\n\n  padded  \n")
    keys = ApiKeys.from_settings(["from-env"], secret)
    for key in ("from-env", "from-file", "padded"):
        keys.check(f"Bearer {key}")
    with pytest.raises(PermissionDenied):
        keys.check("Bearer # rotated 2026-11")
    with pytest.raises(RuntimeError, match="cannot be read"):  # never start open by accident
        ApiKeys.from_settings([], tmp_path / "missing")


def test_keys_are_not_kept_in_clear() -> None:
    keys = ApiKeys(["very-secret-key"])
    assert "very-secret-key" not in repr(vars(keys))


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (None, "an API key is required: send the header Authorization: Bearer <key>"),
        ("k1", "the Authorization header has a value without the Bearer scheme: expected `Bearer <key>`"),
        ("Basic abc", "the Authorization header has the scheme Basic: expected `Bearer <key>`"),
        ("Bearer", "the Authorization header says Bearer but holds no key: expected `Bearer <key>`"),
    ],
)
def test_the_message_says_what_the_header_lacks_and_never_echoes_a_key(header: str | None, says: str) -> None:
    with pytest.raises(Unauthenticated) as info:
        ApiKeys(["k1"]).check(header)
    assert str(info.value.message).startswith(says)
    with pytest.raises(Unauthenticated) as info:
        ApiKeys(["very-secret-key"]).check("very-secret-key")  # the key without its scheme
    assert "very-secret-key" not in info.value.message
