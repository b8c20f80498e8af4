# -*- test-case-name: tests.relay.test_vhost -*-
"""
The HTTP port's front: reads the first request head of each connection
(at most L{MAX_HEAD} bytes, under a timeout) and picks who serves the
connection by its C{Host}:

  - C{NAME.SHARE_DOMAIN} for a share that asked for plain HTTP: the relay's
    HTTP proxy for that share (the relay reads the traffic; the share chose
    it);
  - anything else: the redirect to HTTPS (L{nfltr.relay.redirect}), which
    also answers a malformed request.

On a replica of a cluster a host under the share domain that names no share
of its own waits for the directory (the connection is not read meanwhile):
a share another replica publishes in plain HTTP is served through the
replica link (L{nfltr.relay.cluster.routes.ClusterPlainRoutes}).

The whole connection goes to the one chosen; a later request on it for
another host is answered C{421} by the share's proxy (browsers open a
connection per host, and retry a 421 on a new one).  Parsing is h11's, and
the host is the one the proxy checks (L{nfltr.http.requestHost}: an
absolute-form target's authority, else C{Host}), so the two cannot
disagree about where a request goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h11
from twisted.internet import interfaces
from twisted.internet.defer import Deferred
from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure

from nfltr.http import requestHost
from nfltr.streams import AdmittingFactory, PrefixReader

#: Bytes of a first request head the front reads before it gives up
#: choosing (the redirect then answers).
MAX_HEAD = 64 * 1024
#: Seconds a connection has to send its first request head.
HEAD_TIMEOUT = 30.0

#: Returns the factory serving a host name (lowercase, no port), or None; or a
#: Deferred of either (a replica asks the directory about a share published
#: elsewhere: the connection is not read meanwhile).
Chooser = Callable[[str], Any]


def request_host(head: bytes) -> str | bool | None:
    """
    The host name (lowercase, port dropped) of the first request in
    C{head}; L{False} while the head is incomplete; L{None} if it is
    malformed or has no C{Host}.
    """
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    try:
        connection.receive_data(head)
        event = connection.next_event()
    except h11.RemoteProtocolError:
        return None
    if event is h11.NEED_DATA:
        return False
    if not isinstance(event, h11.Request):
        return None
    return requestHost(event)


class HostRouter(PrefixReader):
    """
    Routes one connection of the HTTP port by its first C{Host}.
    """

    #: The connection was lost.
    gone = False

    def __init__(self, factory: HostRouterFactory, addr: Any) -> None:
        super().__init__(factory, addr)
        self._buffer = bytearray()

    def prefixReceived(self, data: bytes) -> None:
        """
        Read until the head is whole (or too long), then hand over.
        """
        self._buffer += data
        host = request_host(bytes(self._buffer))
        if host is False and len(self._buffer) <= MAX_HEAD:
            return
        self.cancelTimer()
        chosen = self.factory.choose(host) if isinstance(host, str) else None
        received, self._buffer = bytes(self._buffer), bytearray()
        if isinstance(chosen, Deferred):
            self.transport.pauseProducing()
            chosen.addCallback(self._chosen, received)
            return
        self.handOver(chosen or self.factory.fallback, received)

    def _chosen(self, chosen: interfaces.IProtocolFactory | None, received: bytes) -> None:
        """
        The choice came later: hand over, unless the connection went away
        meanwhile.
        """
        if self.gone:
            return
        self.transport.resumeProducing()
        self.handOver(chosen or self.factory.fallback, received)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """
        Gone (before a choice that comes later, too).
        """
        self.gone = True
        super().connectionLost(reason)

    def timedOut(self) -> None:
        """
        No whole head in time: close.
        """
        self.transport.abortConnection()


class HostRouterFactory(AdmittingFactory):
    """
    Builds a L{HostRouter} per connection.

    @ivar choose: the factory of a host's share, or L{None}.
    @ivar fallback: serves every other connection (the redirect site).
    """

    noisy = False

    def __init__(
        self, choose: Chooser, fallback: interfaces.IProtocolFactory,
        clock: interfaces.IReactorTime, timeout: float = HEAD_TIMEOUT,
    ) -> None:
        self.choose = choose
        self.fallback = fallback
        self.clock = clock
        self.timeout = timeout

    def makeReader(self, addr: Any) -> HostRouter:
        """
        A router for one admitted connection.
        """
        return HostRouter(self, addr)
