# -*- test-case-name: tests.sni.test_hello -*-
"""
The body of a ClientHello, decoded into the few fields the router needs.

L{parse_client_hello} takes the handshake message's body (what follows its
4-byte header) as one immutable C{bytes} and walks it with
C{struct.unpack_from} at explicit offsets, checking every length against the
end of the vector that holds it; only the server name and the ALPN protocol
names are copied out.  The structure is RFC 8446 section 4.1.2 (TLS 1.2's is
the same, with the extension block optional)::

    legacy_version (u16) | random (32) | legacy_session_id <0..32>
    | cipher_suites <2..2^16-2> | legacy_compression_methods <1..2^8-1>
    | extensions <0..2^16-1>   (absent altogether in old TLS 1.2 hellos)

Each extension is C{type (u16) | length (u16) | data}; no type may appear
twice.  Three are decoded (server_name, ALPN, supported_versions), one is
noted (encrypted_client_hello), the others are walked over.  Everything else
a TLS stack checks (cipher suites, key shares, the PSK extension being last)
is left to the backend that ends the TLS connection: the router only needs
to know where to send the bytes.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import idna

from ._errors import ClientHelloError, Reason

#: The handshake type of a ClientHello.
CLIENT_HELLO = 1

#: Extension types the parser looks at (IANA "TLS ExtensionType Values").
EXT_SERVER_NAME = 0
EXT_ALPN = 16
EXT_SUPPORTED_VERSIONS = 43
#: encrypted_client_hello (RFC 9849, formerly draft-ietf-tls-esni).
EXT_ECH = 0xFE0D

#: The version number that supported_versions carries for TLS 1.3.
TLS13 = 0x0304

#: server_name's name_type for a DNS host name (RFC 6066 section 3).
HOST_NAME = 0

_U16 = struct.Struct("!H")
_EXT_HEADER = struct.Struct("!HH")
_RANDOM_SIZE = 32
_MAX_SESSION_ID = 32
# The fixed fields before the variable ones: legacy_version and random.
_FIXED_SIZE = 2 + _RANDOM_SIZE

#: The longest host name (RFC 1035 section 2.3.4, without the trailing dot).
MAX_HOST_NAME = 253

# A DNS host name: dot-separated LDH labels (letters, digits, hyphens; 1-63
# octets; no hyphen at either end).  Matched on the lowercased bytes, so only
# ASCII can pass.  Each label can backtrack at most 62 positions: linear.
_HOST_NAME = re.compile(
    rb"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
)
_ACE_PREFIX = b"xn--"


@dataclass(frozen=True, slots=True)
class ClientHello:
    """
    What the router needs from a visitor's ClientHello.

    @ivar server_name: the host name of the server_name extension (SNI),
        lowercased, a valid DNS name in ASCII (internationalised labels in
        their C{xn--} form); C{None} when the client sent none.  With ECH
        this is the outer, public name.
    @ivar alpn: the ALPN protocol names in the client's order (RFC 7301),
        decoded as Latin-1 so any octets survive (C{name.encode("latin-1")}
        gives them back); empty without the extension.
    @ivar legacy_version: the hello's C{legacy_version} field (C{0x0303} for
        TLS 1.2 and for every TLS 1.3 hello).
    @ivar supported_versions: the versions of the supported_versions
        extension in the client's order, GREASE values included; empty
        without it (a client that offers at most TLS 1.2).
    @ivar ech: an encrypted_client_hello extension (0xfe0d) is present, a
        real one or GREASE: they cannot be told apart, nor need to be, as
        the router routes on the outer name.
    @ivar extensions: the types of all the extensions in order.
    """

    server_name: str | None
    alpn: tuple[str, ...]
    legacy_version: int
    supported_versions: tuple[int, ...]
    ech: bool
    extensions: tuple[int, ...]

    @property
    def tls13(self) -> bool:
        """
        Whether the client offers TLS 1.3.
        """
        return TLS13 in self.supported_versions


def parse_client_hello(body: bytes) -> ClientHello:
    """
    Decode the body of a ClientHello handshake message.

    @param body: exactly the message's body: C{length} bytes after the
        4-byte handshake header.
    @raise ClientHelloError: with L{Reason.BAD_HELLO}, L{Reason.BAD_EXTENSION}
        or L{Reason.BAD_SERVER_NAME}; nothing else.
    """
    end = len(body)
    if end < _FIXED_SIZE:
        raise ClientHelloError(Reason.BAD_HELLO, "too short for version and random")
    (legacy_version,) = _U16.unpack_from(body, 0)
    start, pos = _vector8(body, _FIXED_SIZE, end, Reason.BAD_HELLO, "session id")
    if pos - start > _MAX_SESSION_ID:
        raise ClientHelloError(Reason.BAD_HELLO, f"session id of {pos - start} bytes")
    start, pos = _vector16(body, pos, end, Reason.BAD_HELLO, "cipher suites")
    if pos == start or (pos - start) % 2:
        raise ClientHelloError(Reason.BAD_HELLO, f"cipher suites of {pos - start} bytes")
    start, pos = _vector8(body, pos, end, Reason.BAD_HELLO, "compression methods")
    if pos == start:
        raise ClientHelloError(Reason.BAD_HELLO, "no compression method")
    if pos == end:
        # A TLS 1.2 (or older) hello may end here: no extensions at all.
        return ClientHello(None, (), legacy_version, (), False, ())
    start, stop = _vector16(body, pos, end, Reason.BAD_HELLO, "extensions")
    if stop != end:
        raise ClientHelloError(Reason.BAD_HELLO, f"{end - stop} bytes after the extensions")
    return _extensions(body, start, stop, legacy_version)


def _extensions(body: bytes, pos: int, end: int, legacy_version: int) -> ClientHello:
    """
    Walk the extension block C{body[pos:end]} and build the hello.
    """
    server_name: str | None = None
    alpn: tuple[str, ...] = ()
    versions: tuple[int, ...] = ()
    types: list[int] = []
    seen: set[int] = set()
    while pos < end:
        if end - pos < _EXT_HEADER.size:
            raise ClientHelloError(Reason.BAD_EXTENSION, "extension header cut short")
        kind, length = _EXT_HEADER.unpack_from(body, pos)
        start = pos + _EXT_HEADER.size
        pos = start + length
        if pos > end:
            raise ClientHelloError(
                Reason.BAD_EXTENSION, f"extension {kind} overruns the extension block"
            )
        if kind in seen:
            raise ClientHelloError(Reason.BAD_EXTENSION, f"extension {kind} repeated")
        seen.add(kind)
        types.append(kind)
        if kind == EXT_SERVER_NAME:
            server_name = _server_name(body, start, pos)
        elif kind == EXT_ALPN:
            alpn = _alpn(body, start, pos)
        elif kind == EXT_SUPPORTED_VERSIONS:
            versions = _supported_versions(body, start, pos)
    return ClientHello(
        server_name, alpn, legacy_version, versions, EXT_ECH in seen, tuple(types)
    )


def _server_name(body: bytes, start: int, end: int) -> str | None:
    """
    The host name of a server_name extension's data C{body[start:end]}:
    C{ServerName server_name_list<1..2^16-1>}, each entry a C{name_type}
    octet and an C{opaque<1..2^16-1>}.  Entries of other name types are
    skipped (none is defined); two host names are refused (RFC 6066).
    """
    pos, stop = _whole16(body, start, end, "server_name")
    if pos == stop:
        raise ClientHelloError(Reason.BAD_EXTENSION, "empty server name list")
    name: str | None = None
    while pos < stop:
        name_type = body[pos]
        first, pos = _vector16(body, pos + 1, stop, Reason.BAD_EXTENSION, "server name")
        if name_type != HOST_NAME:
            continue
        if name is not None:
            raise ClientHelloError(Reason.BAD_EXTENSION, "two host names in server_name")
        name = check_host_name(body[first:pos])
    return name


def check_host_name(raw: bytes) -> str:
    """
    Validate and normalise the host name of a server_name extension.

    RFC 6066: a fully qualified DNS host name in ASCII, without a trailing
    dot, never a literal IP address.  Accepted: dot-separated labels of
    1-63 letters, digits and hyphens (no hyphen first or last), 253 octets
    at most, not ending in an all-digit label (that would be an IPv4
    literal; no top-level domain is all digits), and every C{xn--} label a
    valid IDNA 2008 A-label.  Refused: anything else, including underscores
    (share and relay names are LDH host names) and non-ASCII octets (an
    internationalised name travels as its A-labels).

    @return: the name, lowercased.
    @raise ClientHelloError: with L{Reason.BAD_SERVER_NAME}.
    """
    if not 0 < len(raw) <= MAX_HOST_NAME:
        raise ClientHelloError(Reason.BAD_SERVER_NAME, f"host name of {len(raw)} bytes")
    lowered = raw.lower()
    if not _HOST_NAME.fullmatch(lowered):
        raise ClientHelloError(Reason.BAD_SERVER_NAME, f"not a DNS host name: {raw[:64]!r}")
    labels = lowered.split(b".")
    if labels[-1].isdigit():
        raise ClientHelloError(Reason.BAD_SERVER_NAME, "a literal IP address")
    for label in labels:
        if label.startswith(_ACE_PREFIX):
            try:
                idna.decode(label)
            # idna.IDNAError and the punycode codec's errors are UnicodeErrors,
            # themselves ValueErrors.
            except ValueError:
                raise ClientHelloError(
                    Reason.BAD_SERVER_NAME, f"invalid IDNA label {label!r}"
                ) from None
    return lowered.decode("ascii")


def _alpn(body: bytes, start: int, end: int) -> tuple[str, ...]:
    """
    The protocol names of an ALPN extension's data C{body[start:end]}:
    C{ProtocolName protocol_name_list<2..2^16-1>}, each an
    C{opaque<1..2^8-1>}.
    """
    pos, stop = _whole16(body, start, end, "ALPN")
    if pos == stop:
        raise ClientHelloError(Reason.BAD_EXTENSION, "empty ALPN list")
    names = []
    while pos < stop:
        first, pos = _vector8(body, pos, stop, Reason.BAD_EXTENSION, "ALPN protocol name")
        if first == pos:
            raise ClientHelloError(Reason.BAD_EXTENSION, "empty ALPN protocol name")
        names.append(body[first:pos].decode("latin-1"))
    return tuple(names)


def _supported_versions(body: bytes, start: int, end: int) -> tuple[int, ...]:
    """
    The versions of a ClientHello's supported_versions data
    C{body[start:end]}: C{ProtocolVersion versions<2..254>}.
    """
    first, stop = _vector8(body, start, end, Reason.BAD_EXTENSION, "supported_versions")
    count, odd = divmod(stop - first, 2)
    if stop != end or count == 0 or odd:
        raise ClientHelloError(Reason.BAD_EXTENSION, "malformed supported_versions")
    return struct.unpack_from(f"!{count}H", body, first)


def _vector8(body: bytes, pos: int, end: int, reason: Reason, what: str) -> tuple[int, int]:
    """
    The span C{(start, stop)} of the vector with a one-byte length at
    C{pos}, which must end by C{end}.
    """
    if pos >= end:
        raise ClientHelloError(reason, f"{what} missing")
    start = pos + 1
    stop = start + body[pos]
    if stop > end:
        raise ClientHelloError(reason, f"{what} overruns its container")
    return start, stop


def _vector16(body: bytes, pos: int, end: int, reason: Reason, what: str) -> tuple[int, int]:
    """
    The span C{(start, stop)} of the vector with a two-byte length at
    C{pos}, which must end by C{end}.
    """
    if end - pos < _U16.size:
        raise ClientHelloError(reason, f"{what} missing")
    start = pos + _U16.size
    stop = start + _U16.unpack_from(body, pos)[0]
    if stop > end:
        raise ClientHelloError(reason, f"{what} overruns its container")
    return start, stop


def _whole16(body: bytes, start: int, end: int, what: str) -> tuple[int, int]:
    """
    The span of the two-byte-length vector that must fill an extension's
    data C{body[start:end]} exactly.
    """
    first, stop = _vector16(body, start, end, Reason.BAD_EXTENSION, what)
    if stop != end:
        raise ClientHelloError(Reason.BAD_EXTENSION, f"{what} does not fill its extension")
    return first, stop
