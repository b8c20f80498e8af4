# -*- test-case-name: tests.agent.test_local -*-
"""
Local TCP connections: the agent's connections to its service and the
client's accepted connections, each spliced to a session.

L{ServiceConnector} reaches a service on this host without resolving
C{localhost} (a resolver thread per session would cost more than the
connection): it tries 127.0.0.1 first and, if that is refused, ::1, and
then remembers per port which address answered, so a service listening on
either loopback address is found.  A service bound to another address of
the host is not reached.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, error
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint
from twisted.internet.interfaces import IProtocol
from twisted.internet.protocol import Factory

from nfltr.e2ee import half_close_other
from nfltr.splice import SpliceEnd

# Seconds to wait for a local service to accept a connection.
SERVICE_CONNECT_TIMEOUT = 10.0
IPV4_LOOPBACK = "127.0.0.1"
IPV6_LOOPBACK = "::1"


class TcpEnd(SpliceEnd):
    """
    The end of a splice on a local TCP connection.

    Beyond L{SpliceEnd}: sets C{TCP_NODELAY}; aborts at once if the other
    end is already gone; and on EOF half-closes an end-to-end TLS layer on
    the other side (L{E2EETLSProtocol} sends C{close_notify} and reading
    goes on), where a plain splice end would close TLS whole.
    """

    def connectionMade(self) -> None:
        """
        Join the other end, or abort if it already closed.
        """
        setNoDelay = getattr(self.transport, "setTcpNoDelay", None)
        if setNoDelay is not None:
            setNoDelay(True)
        other = self.other
        if other is not None and other.closed:
            self.connected = True
            self.transport.abortConnection()
            return
        super().connectionMade()

    def readConnectionLost(self) -> None:
        """
        EOF from the local peer: half-close the other side.
        """
        if not half_close_other(self.other):
            super().readConnectionLost()


def splice_local() -> tuple[TcpEnd, SpliceEnd]:
    """
    A splice whose first end goes on a local TCP connection and whose second
    on a session (or the TLS layer inside it).
    """
    local, remote = TcpEnd(), SpliceEnd()
    local.other, remote.other = remote, local
    return local, remote


class _One(Factory):
    """
    Hands out one given protocol, quietly (no log line per connection).
    """

    noisy = False

    def __init__(self, protocol: IProtocol) -> None:
        self.one = protocol

    def buildProtocol(self, addr: Any) -> Any:
        """
        The protocol.
        """
        return self.one


class ServiceConnector:
    """
    Connects protocols to local services by port.

    @ivar preferIPv6: the ports whose service answered on ::1 (not on
        127.0.0.1).
    """

    def __init__(self, reactor: Any, timeout: float = SERVICE_CONNECT_TIMEOUT) -> None:
        self.reactor = reactor
        self.timeout = timeout
        self.preferIPv6: set[int] = set()

    def _endpoint(self, port: int, ipv6: bool) -> Any:
        if ipv6:
            return TCP6ClientEndpoint(self.reactor, IPV6_LOOPBACK, port, self.timeout)
        return TCP4ClientEndpoint(self.reactor, IPV4_LOOPBACK, port, self.timeout)

    def connect(self, port: int, protocol: IProtocol) -> defer.Deferred[IProtocol]:
        """
        Connect C{protocol} to the service on C{port}; cancelling the result
        cancels the attempt (and fails it with L{defer.CancelledError}).
        """
        ipv6 = port in self.preferIPv6
        d = self._endpoint(port, ipv6).connect(_One(protocol))

        def otherFamily(failure: Any) -> Any:
            failure.trap(error.ConnectionRefusedError)
            retry = self._endpoint(port, not ipv6).connect(_One(protocol))

            def remember(result: IProtocol) -> IProtocol:
                if ipv6:
                    self.preferIPv6.discard(port)
                else:
                    self.preferIPv6.add(port)
                return result

            def firstRefusal(second: Any) -> Any:
                return second if second.check(*_CANCELLED) else failure

            return retry.addCallbacks(remember, firstRefusal)

        return d.addErrback(otherFamily).addErrback(_cancelled)


_CANCELLED = (defer.CancelledError, error.ConnectingCancelledError)


def _cancelled(failure: Any) -> Any:
    """
    Report a cancelled attempt as L{defer.CancelledError}, whichever layer
    noticed.
    """
    if failure.check(error.ConnectingCancelledError):
        raise defer.CancelledError()
    return failure
