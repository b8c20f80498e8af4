# -*- test-case-name: tests.relay.ssh.test_forwards -*-
"""
What an SSH client's forwarding requests mean on the relay, without I/O.

C{ssh -R} sends a global request C{tcpip-forward} with the address and port
to bind on the server; the relay binds nothing and reads them as a share:

  - C{-R NAME:80:HOST:PORT}: the share URL C{https://NAME.SHARE_DOMAIN/},
    TLS ended at the relay (C{inspect}: OpenSSH cannot hold the share's
    key), HTTP proxied over the SSH connection;
  - C{-R NAME:443:HOST:PORT}: the same name in C{passthrough}: visitors'
    TLS goes to the service untouched, which must end it itself;
  - C{-R [localhost:]PORT:HOST:PORT} for a port within the relay's public
    ports (C{--public-ports}): that port of the relay, which visitors reach
    straight (as sshd's C{GatewayPorts} would), leased to the account;
  - C{-R [localhost:]PORT:HOST:PORT}, C{-R 0:HOST:PORT} (OpenSSH sends
    C{localhost}, or the empty string for C{-R :PORT...} and C{*}): a TCP
    share on port C{PORT} of the agent named by the SSH user name (C{ssh
    laptop@relay}); port 0 is given the lowest free port from
    L{FIRST_ALLOCATED_PORT}, which the reply carries (OpenSSH prints
    "Allocated port ...").

C{ssh -L}/C{-W} open a C{direct-tcpip} channel to C{HOST:PORT}, which the
relay reads as agent C{HOST}'s TCP share C{PORT}.

Each parser raises L{RequestError} with the text the OpenSSH user should
see.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import Literal

from nfltr.wire.messages import (
    NAME_PATTERN,
    MessageError,
    is_port_text,
    parse_agent_target,
    parse_http_target,
    parse_public_target,
    parse_share_target,
)

HTTP_PORT = 80
HTTPS_PORT = 443
#: The first port given to C{-R 0:...}.
FIRST_ALLOCATED_PORT = 10000
#: Addresses that mean "this connection's agent" in a C{tcpip-forward}.
AGENT_ADDRESSES = frozenset({"", "localhost", "*", "0.0.0.0", "::", "127.0.0.1", "::1"})
#: The longest host string the relay reads in a request.
MAX_HOST = 255

Kind = Literal["http", "passthrough", "tcp", "public"]
HTTP: Kind = "http"
PASSTHROUGH: Kind = "passthrough"
TCP: Kind = "tcp"
PUBLIC: Kind = "public"


class RequestError(Exception):
    """
    A request the relay refuses; the text is for the user.
    """


@dataclass(frozen=True)
class Forward:
    """
    One remote forward (C{-R}) of a connection.

    @ivar address: the bind address as the client sent it.
    @ivar port: the port the forward answers to: as the client sent it, or
        the one allocated for 0.
    @ivar kind: L{HTTP}, L{PASSTHROUGH} or L{TCP}.
    @ivar name: the share's name (HTTP, passthrough) or the agent's (TCP).
    """

    address: str
    port: int
    kind: Kind
    name: str


def _string(data: bytes, offset: int, what: str) -> tuple[bytes, int]:
    if len(data) < offset + 4:
        raise RequestError(f"malformed {what}: truncated")
    (length,) = struct.unpack_from(">L", data, offset)
    start = offset + 4
    if length > MAX_HOST or len(data) < start + length:
        raise RequestError(f"malformed {what}: bad string length")
    return data[start : start + length], start + length


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        raise RequestError(f"malformed {what}: the host is not ASCII") from None


def _uint32(data: bytes, offset: int, what: str) -> tuple[int, int]:
    if len(data) < offset + 4:
        raise RequestError(f"malformed {what}: truncated")
    return struct.unpack_from(">L", data, offset)[0], offset + 4


def parse_forward_request(data: bytes) -> tuple[str, int]:
    """
    The address and port of a C{tcpip-forward} or C{cancel-tcpip-forward}
    request's data.
    """
    raw, offset = _string(data, 0, "forward request")
    port, offset = _uint32(data, offset, "forward request")
    if offset != len(data):
        raise RequestError("malformed forward request: trailing bytes")
    if port > 65535:  # noqa: PLR2004
        raise RequestError(f"invalid port {port}")
    return _text(raw, "forward request").lower(), port


def parse_direct_tcpip(data: bytes) -> tuple[str, int]:
    """
    The host and port a C{direct-tcpip} channel asks for (the originator's
    address that follows is read and ignored).
    """
    raw, offset = _string(data, 0, "direct-tcpip request")
    port, offset = _uint32(data, offset, "direct-tcpip request")
    _, offset = _string(data, offset, "direct-tcpip request")
    _, offset = _uint32(data, offset, "direct-tcpip request")
    if offset != len(data):
        raise RequestError("malformed direct-tcpip request: trailing bytes")
    if not 1 <= port <= 65535:  # noqa: PLR2004
        raise RequestError(f"invalid port {port}")
    return _text(raw, "direct-tcpip request").lower(), port


def pack_forwarded_tcpip(address: str, port: int, origin: str, originPort: int) -> bytes:
    """
    The data of a C{forwarded-tcpip} channel open: the forward's address
    and port (as the client asked, so it finds its forward), then the
    originator's.
    """
    a, o = address.encode("ascii"), origin.encode("ascii")
    return (struct.pack(">L", len(a)) + a + struct.pack(">L", port)
            + struct.pack(">L", len(o)) + o + struct.pack(">L", originPort))


def pack_port(port: int) -> bytes:
    """
    The reply data of a C{tcpip-forward} for port 0: the allocated port.
    """
    return struct.pack(">L", port)


def classify(
    address: str, port: int, user: str, public: Container[int] = (),
) -> tuple[Kind, str]:
    """
    What a C{tcpip-forward} for C{address}, C{port} from user C{user}
    publishes (see the module): the kind and the share's or agent's name
    (none for a public port, one of C{public}).
    """
    if address in AGENT_ADDRESSES and port in public:
        return PUBLIC, ""
    if address in AGENT_ADDRESSES:
        if not NAME_PATTERN.fullmatch(user):
            raise RequestError(
                f"a TCP share is named after the SSH user, and {user!r} is not a valid agent "
                "name: connect as NAME@relay with NAME of 1-63 lowercase letters, digits and "
                "hyphens"
            )
        return TCP, user
    if not NAME_PATTERN.fullmatch(address) or _is_ip(address):
        raise RequestError(
            f"cannot forward {address}:{port}: use -R NAME:80:HOST:PORT for a share URL, "
            "-R NAME:443:HOST:PORT for a TLS passthrough share, or -R PORT:HOST:PORT (0 for any "
            "port) for a TCP share"
        )
    if port == HTTP_PORT:
        return HTTP, address
    if port == HTTPS_PORT:
        return PASSTHROUGH, address
    raise RequestError(
        f"a share URL is published on port 80 (HTTP, TLS ended by the relay) or 443 (TLS "
        f"passthrough), not {port}: -R {address}:80:HOST:PORT"
    )


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class ForwardTable:
    """
    The remote forwards of one SSH connection, by the address and port the
    client knows them by, and by the session targets the relay opens.

    @ivar limit: the most forwards (L{nfltr.ssh.SSHConfig.max_forwards}).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._forwards: dict[tuple[str, int], Forward] = {}

    def __len__(self) -> int:
        return len(self._forwards)

    def __iter__(self) -> Iterator[Forward]:
        return iter(list(self._forwards.values()))

    def check(self, address: str, port: int, user: str, public: Container[int] = ()) -> Forward:
        """
        The forward a request would add (port 0 allocated), without adding
        it; a port in C{public} is a public port of the relay's.

        @raise RequestError: it cannot be added.
        """
        if len(self._forwards) >= self.limit:
            raise RequestError(f"at most {self.limit} remote forwards per connection")
        if (address, port) in self._forwards:
            raise RequestError(f"{address}:{port} is forwarded already")
        kind, name = classify(address, port, user, public)
        if kind == PUBLIC:
            if any(f.kind == PUBLIC and f.port == port for f in self._forwards.values()):
                raise RequestError(f"public port {port} is forwarded already")
        elif kind != TCP:
            if self.share(name) is not None:
                raise RequestError(f"share {name} is forwarded already")
        elif port == 0:
            port = self._free_port()
        elif port in self.tcp_ports():
            raise RequestError(f"TCP port {port} is forwarded already")
        return Forward(address, port, kind, name)

    def add(self, forward: Forward) -> None:
        """
        Record C{forward} (from L{check}).
        """
        self._forwards[forward.address, forward.port] = forward

    def remove(self, address: str, port: int) -> Forward | None:
        """
        Forget the forward the client knows as C{address}, C{port}.
        """
        return self._forwards.pop((address, port), None)

    def tcp_ports(self) -> frozenset[int]:
        """
        The ports of the TCP shares.
        """
        return frozenset(f.port for f in self._forwards.values() if f.kind == TCP)

    def share(self, name: str) -> Forward | None:
        """
        The HTTP or passthrough forward of the share C{name}.
        """
        for forward in self._forwards.values():
            if forward.kind in (HTTP, PASSTHROUGH) and forward.name == name:
                return forward
        return None

    def _public(self, port: int) -> Forward | None:
        for forward in self._forwards.values():
            if forward.kind == PUBLIC and forward.port == port:
                return forward
        return None

    def for_target(self, target: str) -> tuple[Forward, str | None] | None:
        """
        The forward a session target of the relay's (C{tcp:PORT},
        C{http:NAME}, C{share:NAME@VISITOR}) goes to, and the visitor's
        C{HOST:PORT} if the target names one.
        """
        try:
            http = parse_http_target(target)
            if http is not None:
                forward = self.share(http)
                return None if forward is None or forward.kind != HTTP else (forward, None)
            shared = parse_share_target(target)
            if shared is not None:
                name, visitor = shared
                forward = self.share(name)
                ok = forward is not None and forward.kind == PASSTHROUGH
                return (forward, visitor) if ok else None  # type: ignore[return-value]
            public = parse_public_target(target)
            if public is not None:
                forward = self._public(public[0])
                return None if forward is None else (forward, public[1])
            port = parse_agent_target(target)
        except MessageError:
            return None
        for forward in self._forwards.values():
            if forward.kind == TCP and forward.port == port:
                return forward, None
        return None

    def _free_port(self) -> int:
        used = self.tcp_ports()
        port = FIRST_ALLOCATED_PORT
        while port in used:
            port += 1
        return port


def split_visitor(visitor: str | None) -> tuple[str, int]:
    """
    The originator host and port to name in a C{forwarded-tcpip} open, from
    a visitor's C{HOST:PORT} (C{[HOST]:PORT} for IPv6); the relay's loopback
    when it is unknown.
    """
    if visitor:
        host, _, port = visitor.rpartition(":")
        host = host.strip("[]")
        if host and is_port_text(port) and int(port) <= 65535:  # noqa: PLR2004
            try:
                return str(ipaddress.ip_address(host)), int(port)
            except ValueError:
                pass
    return "127.0.0.1", 0
