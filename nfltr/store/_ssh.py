# -*- test-case-name: tests.store.test_ssh -*-
"""
SSH public keys that accounts register for the relay's SSH listener (the way
a plain OpenSSH client authenticates): parsing an OpenSSH public key line,
its fingerprint as OpenSSH prints it, and what key types are accepted.

Accepted: ssh-ed25519, ECDSA on P-256/P-384/P-521, and RSA of 3072 bits or
more (what ssh-audit accepts for client keys).  Pure functions, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key

from ._model import StoreError

#: The shortest RSA key accepted.
MIN_RSA_BITS = 3072
#: The longest public key line read.
MAX_LINE = 16 * 1024
# The armour of every private key file ssh-keygen writes or reads: OpenSSH's own, PKCS#8 and
# the older PEM ones (RSA, EC, DSA), encrypted or not.
_PRIVATE_KEY = re.compile(r"-----BEGIN (?:OPENSSH |RSA |EC |DSA |ENCRYPTED )?PRIVATE KEY-----")
_FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")
_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
          "ssh-rsa")


class InvalidSSHKey(StoreError, ValueError):
    """
    Not a usable SSH public key; the text says why.
    """


@dataclass(frozen=True)
class SSHKey:
    """
    A parsed SSH public key.

    @ivar fingerprint: C{SHA256:...}, as C{ssh-keygen -l} prints it.
    @ivar line: C{TYPE BASE64} (the comment left out).
    @ivar comment: the comment of the line given, if any.
    """

    fingerprint: str
    algorithm: str
    line: str
    comment: str | None


@dataclass(frozen=True)
class SSHKeyInfo:
    """
    A registered SSH key.
    """

    fingerprint: str
    account: str
    algorithm: str
    label: str | None
    created_at: float


def is_fingerprint(text: object) -> bool:
    """
    Whether C{text} has the shape of a fingerprint L{fingerprint_of} gives.
    """
    return isinstance(text, str) and _FINGERPRINT.fullmatch(text) is not None


def fingerprint_of(blob: bytes) -> str:
    """
    OpenSSH's fingerprint of a public key blob.
    """
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")
    return f"SHA256:{digest}"


def parse_ssh_public_key(text: str) -> SSHKey:
    """
    Read an OpenSSH public key line (C{TYPE BASE64 [COMMENT]}).

    @raise InvalidSSHKey: malformed, of a type not accepted, or too weak.
    """
    if len(text) > MAX_LINE:
        raise InvalidSSHKey("the public key line is too long")
    if _PRIVATE_KEY.search(text):
        raise InvalidSSHKey("this is a private key: pass the public key, the matching .pub file "
                            "(ssh-keygen -y -f KEY prints it); never hand a private key out")
    parts = text.strip().split(None, 2)
    if len(parts) < 2:  # noqa: PLR2004
        raise InvalidSSHKey("expected an OpenSSH public key line: TYPE BASE64 [COMMENT]")
    algorithm, data = parts[0], parts[1]
    if algorithm not in _TYPES:
        raise InvalidSSHKey(f"key type {algorithm!r} is not accepted: use ssh-ed25519, "
                            "ecdsa-sha2-nistp256/384/521 or ssh-rsa of 3072 bits or more")
    try:
        blob = base64.b64decode(data, validate=True)
        key = load_ssh_public_key(f"{algorithm} {data}".encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError) as e:
        raise InvalidSSHKey(f"unreadable {algorithm} key: {e}") from None
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS:
        raise InvalidSSHKey(f"an RSA key of {key.key_size} bits: at least {MIN_RSA_BITS}")
    if not isinstance(key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey |
                      rsa.RSAPublicKey):
        raise InvalidSSHKey(f"key type {algorithm!r} is not accepted")
    comment = parts[2].strip() if len(parts) > 2 else None  # noqa: PLR2004
    return SSHKey(fingerprint_of(blob), algorithm, f"{algorithm} {data}", comment or None)
