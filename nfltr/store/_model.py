# -*- test-case-name: tests.store.test_sqlite -*-
"""
What every store backend shares: account and key records, their errors, and
the API key format.

An API key reads C{nfltr_<keyid>_<secret>}: C{keyid} is 12 lowercase hex
digits (public: it names the key in listings and revocations), C{secret} is
32 random bytes in URL-safe base64 without padding.  A store keeps only the
SHA-256 of the whole key text, never the key itself.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import unicodedata
from dataclasses import dataclass

KEY_PREFIX = "nfltr_"
KEYID_BYTES = 6
SECRET_BYTES = 32
MAX_LABEL_LENGTH = 100

_ACCOUNT_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_KEYID = re.compile(r"[0-9a-f]{12}")
# 32 bytes in base64 without padding are 43 characters.
_KEY = re.compile(r"nfltr_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
_MAX_KEY_LENGTH = 128

# Compared against when a key names an unknown keyid, so that an unknown id
# costs the same hash-and-compare as a wrong secret.
DUMMY_HASH = hashlib.sha256(b"nfltr: no such key").digest()


class StoreError(Exception):
    """
    Base class of the errors a store raises on purpose.  The message is meant
    for the operator and never contains a secret.
    """


class InvalidName(StoreError, ValueError):
    """
    An account name does not match C{^[a-z0-9][a-z0-9-]{0,31}$}.
    """

    def __init__(self, name: str) -> None:
        super().__init__(
            f"invalid account name {name!r}: use 1 to 32 characters from a-z, 0-9 and '-', "
            "starting with a letter or a digit"
        )
        self.name = name


class InvalidLabel(StoreError, ValueError):
    """
    A key label is too long or holds control characters.
    """

    def __init__(self, label: str) -> None:
        super().__init__(
            f"invalid key label {label!r}: use at most {MAX_LABEL_LENGTH} printable characters"
        )
        self.label = label


class AccountExists(StoreError):
    """
    An account with this name exists already.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"an account named {name!r} already exists")
        self.name = name


class UnknownAccount(StoreError, LookupError):
    """
    No account has this name.
    """

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no account named {name!r}; create it first with: nfltr accounts create {name}"
        )
        self.name = name


class UnknownKey(StoreError, LookupError):
    """
    No API key has this key id.
    """

    def __init__(self, keyid: str) -> None:
        super().__init__(f"no API key with id {keyid!r}")
        self.keyid = keyid


class StoreUnavailable(StoreError):
    """
    The store did not answer: a shared directory (Redis) is unreachable, did
    not answer within its command timeout, or refused the connection (a wrong
    password, say).  Worth retrying later; nothing was changed, or the change
    is unknown.
    """


class LeaseTaken(StoreError):
    """
    Another account holds a name's lease in a shared lease table.

    @ivar name: the name.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"name {name} is leased to another account")
        self.name = name


class StoreCorrupt(StoreError):
    """
    The store holds data this nfltr cannot read: a record with a missing or
    malformed field, or a value of the wrong type where a record should be
    (someone else's key under nfltr's prefix).  The message names the key.
    """


class SchemaTooNew(StoreError):
    """
    The database was written by a newer nfltr than this one.
    """

    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"the database has schema version {found}, but this nfltr knows versions up to "
            f"{known}: upgrade nfltr"
        )
        self.found = found
        self.known = known


@dataclass(frozen=True)
class AccountInfo:
    """
    An account.

    @ivar name: its name, matching C{^[a-z0-9][a-z0-9-]{0,31}$}.
    @ivar created_at: POSIX time of its creation.
    """

    name: str
    created_at: float


@dataclass(frozen=True)
class KeyInfo:
    """
    What a store knows about an API key, without its secret.

    @ivar keyid: the public 12-hex-digit id.
    @ivar account: the name of the account the key belongs to.
    @ivar label: an operator's note, or L{None}.
    @ivar created_at: POSIX time of its creation.
    @ivar revoked_at: POSIX time of its revocation, or L{None} while it is valid.
    """

    keyid: str
    account: str
    label: str | None
    created_at: float
    revoked_at: float | None = None

    @property
    def revoked(self) -> bool:
        """
        Whether the key was revoked.  A revoked key still verifies to its
        L{KeyInfo} so that the relay can tell its holder "key revoked"; it must
        not be let in.
        """
        return self.revoked_at is not None


def check_account_name(name: str) -> str:
    """
    Return C{name} if it is a well-formed account name.

    @raise InvalidName: otherwise.
    """
    if not isinstance(name, str) or _ACCOUNT_NAME.fullmatch(name) is None:
        raise InvalidName(str(name))
    return name


def check_label(label: str | None) -> str | None:
    """
    Return C{label} if it is L{None} or a short printable text.

    @raise InvalidLabel: otherwise.
    """
    if label is None:
        return None
    if (
        not isinstance(label, str)
        or len(label) > MAX_LABEL_LENGTH
        or any(unicodedata.category(c).startswith("C") for c in label)
    ):
        raise InvalidLabel(str(label))
    return label


def is_keyid(text: str) -> bool:
    """
    Whether C{text} has the shape of a key id (12 lowercase hex digits).
    """
    return isinstance(text, str) and _KEYID.fullmatch(text) is not None


def new_key() -> tuple[str, str]:
    """
    Make a fresh API key from L{secrets}.

    @return: C{(keyid, plaintext)}.
    """
    keyid = secrets.token_hex(KEYID_BYTES)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(SECRET_BYTES)).rstrip(b"=")
    return keyid, f"{KEY_PREFIX}{keyid}_{secret.decode('ascii')}"


def parse_key(plaintext: object) -> str | None:
    """
    Return the key id of a well-formed API key, or L{None} for anything else
    (including non-text), without raising.
    """
    if not isinstance(plaintext, str) or len(plaintext) > _MAX_KEY_LENGTH:
        return None
    match = _KEY.fullmatch(plaintext)
    if match is None:
        return None
    return match.group(1)


def hash_key(plaintext: str) -> bytes:
    """
    The digest a store keeps for a key.

    A plain SHA-256 is enough here: a key carries 256 random bits, so there is
    no password-like guessable space for a slow KDF (bcrypt, scrypt, argon2) to
    protect, and verification stays cheap on every agent connection.
    """
    return hashlib.sha256(plaintext.encode("ascii")).digest()
