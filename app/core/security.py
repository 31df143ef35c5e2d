"""Optional API keys (bearer tokens): from RSA_API_KEYS and/or a file (a Docker or Kubernetes secret).

When any key is configured, every endpoint but liveness, readiness and metrics needs
`Authorization: Bearer <key>`: none is `Unauthenticated` (401), a wrong one `PermissionDenied` (403).
Keys are compared in constant time (both sides hashed to one length first, every configured key
compared, no early exit) and never logged: they live as SHA-256 digests only.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from pathlib import Path

from app.core.errors import PermissionDenied, Unauthenticated

logger = logging.getLogger(__name__)

_KNOWN_SCHEMES = frozenset({"basic", "digest", "token", "apikey", "api-key", "negotiate"})


class ApiKeys:
    def __init__(self, keys: list[str]) -> None:
        self._digests = [_digest(key) for key in dict.fromkeys(keys) if key]

    @classmethod
    def from_settings(cls, keys: list[str], keys_file: Path | None) -> ApiKeys:
        """The configured keys; a keys file that cannot be read stops start-up (never serve open by
        accident). One key per line in the file; blank lines and lines starting with # are skipped."""
        found = list(keys)
        if keys_file is not None:
            try:
                lines = keys_file.read_text().splitlines()
            except OSError as exc:
                raise RuntimeError(f"RSA_API_KEYS_FILE {keys_file} cannot be read: {exc.strerror}") from exc
            found += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        api_keys = cls(found)
        if api_keys.enabled:
            logger.info("API keys required: %d configured", len(api_keys._digests))
        return api_keys

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def check(self, authorization: str | None) -> None:
        """Raise unless `authorization` is `Bearer <one of the keys>` (or no key is configured)."""
        if not self._digests:
            return
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if not scheme:
            raise Unauthenticated("an API key is required: send the header Authorization: Bearer <key>")
        if scheme.lower() != "bearer":
            # Never echo the value: it may be the key itself, sent without its scheme (only a well-known
            # scheme's name is said).
            what = "a value without the Bearer scheme"
            if token and scheme.lower() in _KNOWN_SCHEMES:
                what = f"the scheme {scheme}"
            raise Unauthenticated(
                f"the Authorization header has {what}: expected `Bearer <key>` (the word Bearer, a space, "
                "then the key)"
            )
        if not token:
            raise Unauthenticated(
                "the Authorization header says Bearer but holds no key: expected `Bearer <key>`"
            )
        given = _digest(token)
        match = False
        for digest in self._digests:
            match |= hmac.compare_digest(given, digest)
        if not match:
            raise PermissionDenied("the API key is not valid")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()
