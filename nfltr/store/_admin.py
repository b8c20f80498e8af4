# -*- test-case-name: tests.store.test_admin_tokens -*-
"""
Admin tokens: what the relay's API and dashboard (L{nfltr.relay.api}) take
instead of an account's API key.  Every store keeps them beside the
accounts (L{nfltr.store.IAdminTokens}).

An admin token reads C{nfltradm_<tokenid>_<secret>}: C{tokenid} is 12
lowercase hex digits (public: it names the token in listings, revocations
and logs), C{secret} 32 random bytes in URL-safe base64 without padding.
As for API keys (L{nfltr.store._model.hash_key}), a store keeps only the
SHA-256 of the whole text; a check compares digests in constant time and an
unknown id costs the same comparison as a wrong secret.

A I{read-only} token reads everything (for dashboards and monitoring) and
changes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass

from ._model import StoreError

ADMIN_TOKEN_PREFIX = "nfltradm_"
TOKENID_BYTES = 6
SECRET_BYTES = 32

_TOKEN = re.compile(r"nfltradm_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
_TOKENID = re.compile(r"[0-9a-f]{12}")
_MAX_TOKEN_LENGTH = 128

#: Compared against when a token names an unknown id.
DUMMY_TOKEN_HASH = hashlib.sha256(b"nfltr: no such admin token").digest()


class UnknownAdminToken(StoreError, LookupError):
    """
    No admin token has this id.
    """

    def __init__(self, tokenid: str) -> None:
        super().__init__(f"no admin token with id {tokenid!r}")
        self.tokenid = tokenid


@dataclass(frozen=True)
class AdminTokenInfo:
    """
    What a store knows about an admin token, without its secret.

    @ivar tokenid: the public 12-hex-digit id.
    @ivar label: an operator's note, or L{None}.
    @ivar read_only: it may read, not change.
    @ivar created_at: POSIX time of its creation.
    @ivar revoked_at: POSIX time of its revocation, or L{None}.
    """

    tokenid: str
    label: str | None
    read_only: bool
    created_at: float
    revoked_at: float | None = None

    @property
    def revoked(self) -> bool:
        """
        Whether the token was revoked (it lets nothing in any more).
        """
        return self.revoked_at is not None


def new_admin_token() -> tuple[str, str]:
    """
    A fresh admin token from L{secrets}: C{(tokenid, plaintext)}.
    """
    tokenid = secrets.token_hex(TOKENID_BYTES)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(SECRET_BYTES)).rstrip(b"=")
    return tokenid, f"{ADMIN_TOKEN_PREFIX}{tokenid}_{secret.decode('ascii')}"


def parse_admin_token(plaintext: object) -> str | None:
    """
    The token id of a well-formed admin token, or L{None} for anything else
    (non-text included), without raising.
    """
    if not isinstance(plaintext, str) or len(plaintext) > _MAX_TOKEN_LENGTH:
        return None
    match = _TOKEN.fullmatch(plaintext)
    return None if match is None else match.group(1)


def is_tokenid(text: object) -> bool:
    """
    Whether C{text} has the shape of a token id.
    """
    return isinstance(text, str) and _TOKENID.fullmatch(text) is not None


def hash_admin_token(plaintext: str) -> bytes:
    """
    The digest a store keeps for an admin token (SHA-256: the token has 256
    random bits, nothing a slow hash would protect).
    """
    return hashlib.sha256(plaintext.encode("ascii")).digest()
