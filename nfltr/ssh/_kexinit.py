# -*- test-case-name: tests.ssh.test_kexinit -*-
"""
The C{SSH_MSG_KEXINIT} message (RFC 4253 section 7.1) and the negotiation
of algorithms from two of them, without I/O.

Negotiation follows RFC 4253: in each category the first algorithm of the
client's list that the server also lists.  Two amendments, as OpenSSH does
them:

  - an AEAD cipher (AES-GCM) needs no MAC: when one is chosen for a
    direction, that direction's MAC lists are not matched at all (OpenSSH's
    PROTOCOL, 1.6);
  - the pseudo-algorithms that signal extensions (C{ext-info-c},
    C{ext-info-s}, RFC 8308; C{kex-strict-c-v00@openssh.com},
    C{kex-strict-s-v00@openssh.com}, OpenSSH's PROTOCOL 1.9, the Terrapin
    countermeasure) are never chosen as a key exchange method.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

__all__ = [
    "EXT_INFO_CLIENT", "EXT_INFO_SERVER", "MSG_KEXINIT", "PSEUDO_ALGORITHMS",
    "STRICT_KEX_CLIENT", "STRICT_KEX_SERVER", "Algorithms", "KexInit", "KexInitError",
    "NegotiationError", "guessed_wrong", "negotiate",
]

MSG_KEXINIT = 20

EXT_INFO_CLIENT = b"ext-info-c"
EXT_INFO_SERVER = b"ext-info-s"
STRICT_KEX_CLIENT = b"kex-strict-c-v00@openssh.com"
STRICT_KEX_SERVER = b"kex-strict-s-v00@openssh.com"
PSEUDO_ALGORITHMS = frozenset({EXT_INFO_CLIENT, EXT_INFO_SERVER, STRICT_KEX_CLIENT,
                               STRICT_KEX_SERVER})

_U32 = struct.Struct("!I")
_COOKIE_SIZE = 16
_NAME_LISTS = 10
#: first_kex_packet_follows (1 byte) and the reserved uint32.
_TRAILER_SIZE = 5


class KexInitError(Exception):
    """
    A KEXINIT that cannot be read.
    """


class NegotiationError(Exception):
    """
    No algorithm in common in one category.

    @ivar category: what could not be agreed (C{"key exchange"}, C{"host
        key"}, C{"cipher"}, C{"MAC"}, C{"compression"}).
    @ivar offered: the server's list for it, to tell the client what would do.
    """

    def __init__(self, category: str, offered: Sequence[bytes]) -> None:
        super().__init__(f"no matching {category}")
        self.category = category
        self.offered = tuple(offered)

    def describe(self) -> bytes:
        """
        The message for the peer: the category and what the server offers.
        """
        return (f"no matching {self.category} algorithm; the server offers "
                f"{b','.join(self.offered).decode('ascii', 'replace')}").encode()


Names = tuple[bytes, ...]


@dataclass(frozen=True)
class KexInit:
    """
    One side's KEXINIT: its lists of algorithms, by preference.
    """

    kex: Names
    host_key: Names
    ciphers_client_to_server: Names
    ciphers_server_to_client: Names
    macs_client_to_server: Names
    macs_server_to_client: Names
    compression_client_to_server: Names = (b"none",)
    compression_server_to_client: Names = (b"none",)
    languages_client_to_server: Names = ()
    languages_server_to_client: Names = ()
    first_kex_packet_follows: bool = False
    cookie: bytes = field(default=b"\0" * _COOKIE_SIZE, compare=False)

    def lists(self) -> tuple[Names, ...]:
        """
        The ten name-lists in wire order.
        """
        return (self.kex, self.host_key, self.ciphers_client_to_server,
                self.ciphers_server_to_client, self.macs_client_to_server,
                self.macs_server_to_client, self.compression_client_to_server,
                self.compression_server_to_client, self.languages_client_to_server,
                self.languages_server_to_client)

    def encode(self) -> bytes:
        """
        The message's payload, message number first.
        """
        parts = [bytes((MSG_KEXINIT,)), self.cookie]
        for names in self.lists():
            joined = b",".join(names)
            parts += (_U32.pack(len(joined)), joined)
        parts.append(b"\1\0\0\0\0" if self.first_kex_packet_follows else b"\0\0\0\0\0")
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> KexInit:
        """
        Read a KEXINIT's payload (after the message number).  Empty names are
        dropped; anything after the reserved field is ignored.
        """
        if len(data) < _COOKIE_SIZE:
            raise KexInitError("KEXINIT too short")
        cookie, pos = data[:_COOKIE_SIZE], _COOKIE_SIZE
        lists: list[Names] = []
        for _ in range(_NAME_LISTS):
            if len(data) - pos < _U32.size:
                raise KexInitError("KEXINIT truncated")
            (size,) = _U32.unpack_from(data, pos)
            pos += 4
            if len(data) - pos < size:
                raise KexInitError("KEXINIT name-list overruns the message")
            lists.append(tuple(name for name in data[pos : pos + size].split(b",") if name))
            pos += size
        if len(data) - pos < _TRAILER_SIZE:
            raise KexInitError("KEXINIT truncated")
        kex, host_key, ccs, csc, mcs, msc, zcs, zsc, lcs, lsc = lists
        return cls(kex, host_key, ccs, csc, mcs, msc, zcs, zsc, lcs, lsc,
                   first_kex_packet_follows=data[pos] != 0, cookie=cookie)


@dataclass(frozen=True)
class Algorithms:
    """
    What one key exchange agreed.  A MAC is L{None} where the cipher is AEAD.
    """

    kex: bytes
    host_key: bytes
    cipher_client_to_server: bytes
    cipher_server_to_client: bytes
    mac_client_to_server: bytes | None
    mac_server_to_client: bytes | None
    compression_client_to_server: bytes
    compression_server_to_client: bytes


def _first(category: str, client: Names, server: Names, exclude: Collection[bytes] = ()) -> bytes:
    """
    The first of C{client} that C{server} lists too (C{exclude} apart).
    """
    ours = [name for name in server if name not in exclude]
    for name in client:
        if name in ours:
            return name
    raise NegotiationError(category, ours)


def negotiate(client: KexInit, server: KexInit, aead: Collection[bytes]) -> Algorithms:
    """
    The algorithms a client's and a server's KEXINIT agree on, where C{aead}
    names the ciphers that take no MAC.  Raises L{NegotiationError}.
    """
    kex = _first("key exchange", client.kex, server.kex, PSEUDO_ALGORITHMS)
    host_key = _first("host key", client.host_key, server.host_key)
    cipher_cs = _first("cipher", client.ciphers_client_to_server, server.ciphers_client_to_server)
    cipher_sc = _first("cipher", client.ciphers_server_to_client, server.ciphers_server_to_client)
    mac_cs = None if cipher_cs in aead else _first(
        "MAC", client.macs_client_to_server, server.macs_client_to_server)
    mac_sc = None if cipher_sc in aead else _first(
        "MAC", client.macs_server_to_client, server.macs_server_to_client)
    return Algorithms(
        kex, host_key, cipher_cs, cipher_sc, mac_cs, mac_sc,
        _first("compression", client.compression_client_to_server,
               server.compression_client_to_server),
        _first("compression", client.compression_server_to_client,
               server.compression_server_to_client),
    )


def guessed_wrong(client: KexInit, server: KexInit) -> bool:
    """
    Whether a first key exchange packet sent on a guess would be for the
    wrong method (RFC 4253 section 7): the two sides' preferred key exchange
    or host key algorithms differ.
    """
    def preferred(names: Names, exclude: Collection[bytes] = ()) -> bytes | None:
        return next((name for name in names if name not in exclude), None)

    return (preferred(client.kex, PSEUDO_ALGORITHMS) != preferred(server.kex, PSEUDO_ALGORITHMS)
            or preferred(client.host_key) != preferred(server.host_key))
