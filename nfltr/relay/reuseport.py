# -*- test-case-name: tests.relay.test_reuseport -*-
"""
Listeners several relay processes share: the C{reuseport:PORT} endpoint
string (C{--tls reuseport:8443}, C{:interface=ADDRESS}, C{:backlog=N}).

Each replica of a host binds the same port with C{SO_REUSEPORT}; the
kernel spreads new connections over the processes listening (by a hash of
each connection's addresses), so one public port uses every core, and a
visitor who lands on a replica that does not hold its agent is carried
over the replica link (docs/replicas.md).  Only processes of the same user
may share a port.  A listener that closes (a replica draining on SIGTERM,
or dying) has the kernel reset the connections still in its accept queue,
unless C{net.ipv4.tcp_migrate_req=1} moves them to another listener of the
port (L{tests.integration.test_accept_queue}): hand a port to a successor
with C{--takeover} rather than by starting a second listener.

Every other endpoint string is Twisted's (L{serverFromString}), with the
relay's listen backlog (L{nfltr.relay.backlog}).
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.endpoints import _parse, serverFromString
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IListeningPort, IStreamServerEndpoint
from zope.interface import implementer

from .backlog import with_backlog

#: The endpoint type of a shared listener.
REUSEPORT = "reuseport"
#: The largest port number.
MAX_PORT = 65535
#: Its keyword arguments.
_KEYWORDS = frozenset({"interface", "backlog"})
#: The listen backlog when neither the string nor the caller gives one
#: (Twisted's own default).
DEFAULT_REUSEPORT_BACKLOG = 50


@implementer(IStreamServerEndpoint)
class ReusePortEndpoint:
    """
    Listens on C{port} of C{interface} (all IPv4 addresses when empty; an
    IPv6 address listens on IPv6) with C{SO_REUSEADDR} and
    C{SO_REUSEPORT}, through the reactor's C{adoptStreamPort}.
    """

    def __init__(self, reactor: Any, port: int, interface: str = "",
                 backlog: int = DEFAULT_REUSEPORT_BACKLOG) -> None:
        self.reactor = reactor
        self.port = port
        self.interface = interface
        self.backlog = backlog

    def listen(self, protocolFactory: Any) -> Deferred[IListeningPort]:
        """
        See L{IStreamServerEndpoint.listen}.
        """
        family = socket.AF_INET6 if ":" in self.interface else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((self.interface, self.port))
            sock.listen(self.backlog)
            sock.setblocking(False)
            # The port holds a copy of the descriptor; this one is closed below.
            listening = self.reactor.adoptStreamPort(sock.fileno(), family, protocolFactory)
        except OSError as e:
            return fail(CannotListenError(self.interface, self.port, e))
        finally:
            sock.close()
        return succeed(listening)


def parse_reuseport(spec: str, reactor: Any = None,
                    backlog: int = DEFAULT_REUSEPORT_BACKLOG) -> ReusePortEndpoint | None:
    """
    The endpoint of C{spec} if it is a C{reuseport:} string, else L{None}.

    @raise ValueError: a C{reuseport:} string that is not well formed.
    """
    args, kwargs = _parse(spec)
    if not args or str(args[0]).strip().lower() != REUSEPORT:
        return None
    text = str(args[1]) if len(args) == len((REUSEPORT, "PORT")) else ""
    port = int(text) if text.isdigit() else 0
    if not 0 < port <= MAX_PORT:
        raise ValueError(f"reuseport: give a port from 1 to {MAX_PORT} (reuseport:PORT)")
    unknown = set(kwargs) - _KEYWORDS
    if unknown:
        raise ValueError(f"reuseport: unknown argument {sorted(unknown)[0]} (it takes "
                         "interface= and backlog=)")
    text = str(kwargs.get("backlog", backlog))
    if not text.isdigit() or int(text) < 1:
        raise ValueError("reuseport: backlog= must be a number more than 0")
    return ReusePortEndpoint(reactor, port, str(kwargs.get("interface", "")), int(text))


def server_endpoint(reactor: Any, spec: str, backlog: int) -> Any:
    """
    The listener of endpoint string C{spec}: a L{ReusePortEndpoint}, or
    Twisted's with the relay's listen C{backlog} unless C{spec} names one.

    @raise ValueError: C{spec} is not well formed.
    """
    shared = parse_reuseport(spec, reactor, backlog)
    if shared is not None:
        return shared
    return serverFromString(reactor, with_backlog(spec, backlog))
