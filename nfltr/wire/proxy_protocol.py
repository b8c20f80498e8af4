# -*- test-case-name: tests.wire.test_proxy_protocol -*-
"""
The PROXY protocol (HAProxy's, versions 1 and 2), without I/O: the header
a proxy writes first on a connection to say whose connection it carries.

  - L{encode}: the header for a source and destination address, in either
    version (what the agent writes to a service run with
    C{--proxy-protocol}, L{nfltr.agent});
  - L{ProxyHeaderParser}: reads one header off the start of a connection
    (what the relay does for connections from a load balancer it trusts,
    C{--proxy-protocol-from}, L{nfltr.relay.proxy_front}), and the bytes
    after it;
  - L{may_be_header}: whether a connection's first bytes could start a
    header (what the relay refuses from sources it does not trust).

Version 1 is one text line, at most L{MAX_V1} bytes; version 2 a binary
header of 16 bytes, then the addresses and optional TLVs (read and
ignored), at most L{MAX_V2_BODY} bytes.  Addresses are
C{(host, port)} pairs, the host an IPv4 or IPv6 address as text; a
header that names none (v1 C{UNKNOWN}, v2 C{LOCAL} or C{UNSPEC}) is read as
L{ProxyHeader} with both L{None}.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

V1, V2 = "v1", "v2"
VERSIONS = (V1, V2)
V1_PREFIX = b"PROXY "
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
#: The longest version 1 header, CRLF included (the specification's).
MAX_V1 = 107
#: The most bytes a version 2 header may carry after its 16 first: the
#: addresses and TLVs (a load balancer's TLVs are a few hundred bytes).
MAX_V2_BODY = 4096
_V2_HEAD = struct.Struct("!12sBBH")
_PROXY, _LOCAL = 0x21, 0x20
_INET_STREAM, _INET6_STREAM = 0x11, 0x21
_V4_ADDRESSES = struct.Struct("!4s4sHH")
_V6_ADDRESSES = struct.Struct("!16s16sHH")

Address = tuple[str, int]


class ProxyHeaderError(ValueError):
    """
    A PROXY header is malformed; the text says how.
    """


@dataclass(frozen=True)
class ProxyHeader:
    """
    A header read: the connection's source and destination (both L{None}
    when the proxy named none: a health check of its own).
    """

    source: Address | None
    destination: Address | None


def _ips(source: Address, destination: Address) -> tuple[ipaddress.IPv4Address |
                                                          ipaddress.IPv6Address, ...]:
    """
    Both hosts as addresses of one family: IPv4 mapped into IPv6 when the
    other is IPv6.
    """
    ips = [ipaddress.ip_address(source[0]), ipaddress.ip_address(destination[0])]
    if {ip.version for ip in ips} == {4, 6}:
        ips = [ip if ip.version == 6 else ipaddress.IPv6Address(f"::ffff:{ip}")  # noqa: PLR2004
               for ip in ips]
    for (_, port) in (source, destination):
        if not 0 <= port <= 65535:  # noqa: PLR2004
            raise ValueError(f"port {port} out of range")
    return tuple(ips)


def encode(version: str, source: Address, destination: Address) -> bytes:
    """
    The header of C{version} (L{V1} or L{V2}) for a connection from
    C{source} to C{destination}.

    @raise ValueError: a host is not an IP address, a port out of range, or
        an unknown version.
    """
    src, dst = _ips(source, destination)
    four = src.version == 4  # noqa: PLR2004
    if version == V1:
        name = "TCP4" if four else "TCP6"
        return f"PROXY {name} {src} {dst} {source[1]} {destination[1]}\r\n".encode("ascii")
    if version == V2:
        layout, family = (_V4_ADDRESSES, _INET_STREAM) if four else (_V6_ADDRESSES,
                                                                     _INET6_STREAM)
        body = layout.pack(src.packed, dst.packed, source[1], destination[1])
        return _V2_HEAD.pack(V2_SIGNATURE, _PROXY, family, len(body)) + body
    raise ValueError(f"unknown PROXY protocol version {version!r}: use v1 or v2")


def encode_unknown(version: str) -> bytes:
    """
    The header of C{version} that names no addresses (v1 C{UNKNOWN}, v2
    C{LOCAL}): for a connection whose source is not known.

    @raise ValueError: an unknown version.
    """
    if version == V1:
        return b"PROXY UNKNOWN\r\n"
    if version == V2:
        return _V2_HEAD.pack(V2_SIGNATURE, _LOCAL, 0, 0)
    raise ValueError(f"unknown PROXY protocol version {version!r}: use v1 or v2")


def may_be_header(prefix: bytes) -> bool:
    """
    Whether C{prefix}, the first bytes of a connection (any number), is or
    may become the start of a PROXY header of either version.
    """
    if not prefix:
        return False
    return any(prefix[: len(start)] == start[: len(prefix)] for start in (V1_PREFIX,
                                                                           V2_SIGNATURE))


class ProxyHeaderParser:
    """
    Reads one PROXY header, of either version, from the bytes a connection
    brings; see L{feed}.

    @ivar rest: the bytes that came after the header, once it was read.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.rest = b""
        self.done = False

    def feed(self, data: bytes) -> ProxyHeader | None:
        """
        More bytes: the header once complete (then L{rest} holds what
        followed), or L{None} while more are needed.

        @raise ProxyHeaderError: the bytes are no PROXY header.
        """
        if self.done:
            raise ProxyHeaderError("the header was read already")
        buffer = self._buffer = self._buffer + data
        if not may_be_header(buffer[:12]):
            raise ProxyHeaderError("no PROXY protocol header")
        if buffer.startswith(V1_PREFIX):
            return self._v1(buffer)
        if len(buffer) >= _V2_HEAD.size:
            return self._v2(buffer)
        return None

    def _finish(self, header: ProxyHeader, rest: bytes) -> ProxyHeader:
        self.done, self.rest, self._buffer = True, rest, b""
        return header

    def _v1(self, buffer: bytes) -> ProxyHeader | None:
        end = buffer.find(b"\r\n", 0, MAX_V1)
        if end < 0:
            if len(buffer) >= MAX_V1:
                raise ProxyHeaderError(f"a version 1 header longer than {MAX_V1} bytes")
            return None
        return self._finish(_v1_line(buffer[:end]), buffer[end + 2:])

    def _v2(self, buffer: bytes) -> ProxyHeader | None:
        _, versionCommand, family, length = _V2_HEAD.unpack_from(buffer)
        if versionCommand >> 4 != 2:  # noqa: PLR2004
            raise ProxyHeaderError("a version 2 signature with another version")
        if length > MAX_V2_BODY:
            raise ProxyHeaderError(f"a version 2 header longer than {MAX_V2_BODY} bytes")
        end = _V2_HEAD.size + length
        if len(buffer) < end:
            return None
        body, rest = buffer[_V2_HEAD.size:end], buffer[end:]
        if versionCommand == _LOCAL:
            return self._finish(ProxyHeader(None, None), rest)
        if versionCommand != _PROXY:
            raise ProxyHeaderError(f"unknown version 2 command {versionCommand & 0xF}")
        layout = {_INET_STREAM: _V4_ADDRESSES, _INET6_STREAM: _V6_ADDRESSES}.get(family)
        if layout is None:
            if family >> 4 == 0:  # UNSPEC: no addresses to read
                return self._finish(ProxyHeader(None, None), rest)
            raise ProxyHeaderError(f"version 2 family {family:#04x} is not TCP over IP")
        if length < layout.size:
            raise ProxyHeaderError("version 2 addresses truncated")
        src, dst, sport, dport = layout.unpack_from(body)
        source = (str(ipaddress.ip_address(src)), sport)
        destination = (str(ipaddress.ip_address(dst)), dport)
        return self._finish(ProxyHeader(source, destination), rest)


def _v1_line(line: bytes) -> ProxyHeader:
    """
    One version 1 line, CRLF off.
    """
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise ProxyHeaderError("a version 1 header that is not ASCII") from None
    parts = text.split(" ")
    if parts[1:2] == ["UNKNOWN"]:
        return ProxyHeader(None, None)
    if len(parts) != 6 or parts[1] not in ("TCP4", "TCP6"):  # noqa: PLR2004
        raise ProxyHeaderError("a version 1 header is PROXY TCP4|TCP6 SRC DST SPORT DPORT")
    version = 4 if parts[1] == "TCP4" else 6
    hosts = []
    for host in parts[2:4]:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            ip = None
        if ip is None or "%" in host:  # a scoped IPv6 address names no host elsewhere
            raise ProxyHeaderError("a version 1 header with a bad address")
        if ip.version != version:
            raise ProxyHeaderError(f"a version 1 {parts[1]} header with another family")
        hosts.append(str(ip))
    ports = []
    for port in parts[4:6]:
        if not (port.isascii() and port.isdigit()) or len(port) > 5 or int(port) > 65535:  # noqa: PLR2004
            raise ProxyHeaderError("a version 1 header with a bad port")
        ports.append(int(port))
    return ProxyHeader((hosts[0], ports[0]), (hosts[1], ports[1]))


def parse_address(text: str) -> Address | None:
    """
    C{HOST:PORT} (C{[V6]:PORT}), as the relay writes a visitor's address
    in a session target, as a pair; L{None} if it is not one.
    """
    host, _, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not (port.isascii() and port.isdigit()) or len(port) > 5 or int(port) > 65535:  # noqa: PLR2004
        return None
    try:
        return str(ipaddress.ip_address(host)), int(port)
    except ValueError:
        return None
