# -*- test-case-name: tests.tor.test_keys -*-
"""
Onion service keys (version 3), made and kept by nfltr so that a relay knows
its C{.onion} address before Tor is up, and keeps it across restarts.

The key is an Ed25519 private key, kept as PKCS#8 PEM (mode 0600) in the
relay's data directory.  Tor's control port takes it, in C{ADD_ONION}, as
C{ED25519-V3:} and the base64 of the I{expanded} secret key: the SHA-512 of
the seed, its first half clamped as RFC 8032, section 5.1.5 says.  The
address is C{base32(PUBKEY | CHECKSUM | VERSION) + ".onion"}, with CHECKSUM
the first two bytes of C{SHA3-256(".onion checksum" | PUBKEY | VERSION)}
and VERSION C{0x03} (Tor's rend-spec-v3, "Encoding onion addresses").

Client authorization keys (C{ClientAuthV3}) are X25519: the service is
given each client's public key, base32 (no padding); each client's tor its
private key, base64, for the service's address.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

KEY_FILE_MODE = 0o600
ONION_VERSION = b"\x03"
_CHECKSUM_PREFIX = b".onion checksum"
ONION_SUFFIX = ".onion"
#: Length of a version 3 address without C{.onion}.
ADDRESS_LENGTH = 56
_X25519_KEY = 32


class OnionKeyError(Exception):
    """
    An onion key file or client key is unusable; the message says which and why.
    """


def onion_address(public_key: bytes) -> str:
    """
    The C{.onion} address (version 3) of the Ed25519 C{public_key} (32 bytes).
    """
    checksum = hashlib.sha3_256(_CHECKSUM_PREFIX + public_key + ONION_VERSION).digest()[:2]
    label = base64.b32encode(public_key + checksum + ONION_VERSION).decode("ascii").lower()
    return label + ONION_SUFFIX


def is_onion_host(host: str) -> bool:
    """
    Whether C{host} names an onion service (C{ADDRESS.onion}, or a name under one).
    """
    return host.lower().rstrip(".").endswith(ONION_SUFFIX)


@dataclass(frozen=True)
class OnionKey:
    """
    A version 3 onion service's key.

    @ivar seed: the 32 bytes of the Ed25519 private key.
    """

    seed: bytes

    @property
    def address(self) -> str:
        """
        Its C{ADDRESS.onion}.
        """
        public = Ed25519PrivateKey.from_private_bytes(self.seed).public_key()
        return onion_address(public.public_bytes_raw())

    @property
    def service_id(self) -> str:
        """
        Its address without C{.onion}, as the control port names the service.
        """
        return self.address[: -len(ONION_SUFFIX)]

    def control_blob(self) -> str:
        """
        The key as C{ADD_ONION} takes it: C{ED25519-V3:} and the base64 of the expanded
        secret key.
        """
        digest = bytearray(hashlib.sha512(self.seed).digest())
        digest[0] &= 248
        digest[31] &= 127
        digest[31] |= 64
        return "ED25519-V3:" + base64.b64encode(bytes(digest)).decode("ascii")


def load_or_create_key(path: Path) -> OnionKey:
    """
    The key in C{path} (PKCS#8 PEM), made (mode 0600, its directory 0700) on first use.

    @raise OnionKeyError: the file is there but is not an Ed25519 private key.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return _create(path)
    except OSError as e:
        raise OnionKeyError(f"{path}: {e.strerror}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except ValueError:
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise OnionKeyError(f"{path}: not an Ed25519 private key (PEM)")
    return OnionKey(key.private_bytes_raw())


def _create(path: Path) -> OnionKey:
    from nfltr.tls import write_atomically

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    write_atomically(path, pem, KEY_FILE_MODE)
    return OnionKey(key.private_bytes_raw())


def parse_client_key(text: str) -> str:
    """
    A client's public key for C{ClientAuthV3}: base32 of 32 bytes, given bare or as Tor's
    C{authorized_clients} files spell it (C{descriptor:x25519:BASE32}).

    @return: the base32, uppercase, without padding.
    @raise OnionKeyError: anything else.
    """
    value = text.strip()
    prefix = "descriptor:x25519:"
    if value.lower().startswith(prefix):
        value = value[len(prefix):]
    try:
        raw = base64.b32decode(value.upper() + "=" * (-len(value) % 8))
    except ValueError:
        raw = b""
    if len(raw) != _X25519_KEY:
        raise OnionKeyError(
            f"{text.strip()!r}: not a client key (descriptor:x25519: and 52 base32 characters)"
        )
    return base64.b32encode(raw).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class ClientAuthKeys:
    """
    A client authorization key pair (X25519) for one client of onion services.

    @ivar public: the base32 public key, for the service (C{ClientAuthV3}).
    @ivar private: the base64 private key, for the client's tor (C{ONION_CLIENT_AUTH_ADD},
        or a C{.auth_private} file in its C{ClientOnionAuthDir}).
    """

    public: str
    private: str

    def auth_private_line(self, address: str) -> str:
        """
        The line of a C{.auth_private} file that lets a client's tor reach C{address}.
        """
        service = address.lower().removesuffix(ONION_SUFFIX)
        secret = base64.b32encode(base64.b64decode(self.private)).decode("ascii").rstrip("=")
        return f"{service}:descriptor:x25519:{secret}"


def new_client_keys() -> ClientAuthKeys:
    """
    A fresh client authorization key pair.
    """
    key = X25519PrivateKey.generate()
    public = key.public_key().public_bytes_raw()
    return ClientAuthKeys(
        base64.b32encode(public).decode("ascii").rstrip("="),
        base64.b64encode(key.private_bytes_raw()).decode("ascii"),
    )


def read_client_keys(path: Path) -> tuple[str, ...]:
    """
    The client public keys in C{path}: one a line, blank lines and C{#} comments skipped.

    @raise OnionKeyError: unreadable, empty, or a bad line (named by number).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise OnionKeyError(f"{path}: {getattr(e, 'strerror', None) or e}") from None
    keys = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            keys.append(parse_client_key(line))
        except OnionKeyError as e:
            raise OnionKeyError(f"{path} line {number}: {e}") from None
    if not keys:
        raise OnionKeyError(f"{path}: no client key in it")
    return tuple(keys)
