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

Two ways to ask: L{ServiceConnector.connect} returns a Deferred (through
Twisted's endpoints); L{ServiceConnector.dial} takes a L{ServiceAttempt},
the factory of its own C{connectTCP} calls, and reports through it with
plain method calls.  A tunnelled connection uses C{dial}: no endpoint, no
Deferred, no wrapping protocol, no C{DelayedCall} per connection (the
timeouts share one timer, L{Timeouts}), and nothing logged.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from contextlib import ExitStack, suppress
from typing import Any

from twisted.internet import defer, error
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint
from twisted.internet.interfaces import IProtocol
from twisted.internet.protocol import ClientFactory, Factory
from twisted.python.failure import Failure

from nfltr.streams import SpliceEnd
from nfltr.tls import half_close_other

from ._timeouts import Timeouts

# Seconds to wait for a local service to accept a connection.
SERVICE_CONNECT_TIMEOUT = 10.0
IPV4_LOOPBACK = "127.0.0.1"
IPV6_LOOPBACK = "::1"
# The outcomes of a ServiceAttempt.
CONNECTED = "connected"
FAILED = "failed"
CANCELLED = "cancelled"


class TcpEnd(SpliceEnd):
    """
    The end of a splice on a local TCP connection.

    Beyond L{SpliceEnd}: sets C{TCP_NODELAY}; aborts at once if the other
    end is already gone; and on EOF half-closes an end-to-end TLS layer on
    the other side (L{E2EETLSProtocol} sends C{close_notify} and reading
    goes on), where a plain splice end would close TLS whole.
    """

    #: Writes the first bytes the service gets, given its address: a PROXY
    #: protocol header (L{nfltr.agent._proxy}); L{None}: none.
    header: Callable[[Any], bytes] | None = None

    def connectionMade(self) -> None:
        """
        Join the other end (after the header, if any), or abort if it
        already closed.
        """
        setNoDelay = getattr(self.transport, "setTcpNoDelay", None)
        if setNoDelay is not None:
            setNoDelay(True)
        other = self.other
        if other is not None and other.closed:
            self.connected = True
            self.transport.abortConnection()
            return
        if self.header is not None:
            self.transport.write(self.header(self.transport.getPeer()))
        super().connectionMade()

    def readConnectionLost(self) -> None:
        """
        EOF from the local peer: half-close the other side (no longer its
        producer: see L{SpliceEnd.leaveOther}).
        """
        self.leaveOther()
        if not half_close_other(self.other):
            super().readConnectionLost()

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        End the other side as L{SpliceEnd} does, then let go of it and of
        C{onLost}: the two ends refer to each other, and C{onLost} is often
        a closure over this end, cycles only the garbage collector would
        free otherwise.
        """
        super().connectionLost(reason)
        self.other = None
        self.onLost = None


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


class ServiceAttempt(ClientFactory):
    """
    One connection to a local service by L{ServiceConnector.dial}: the
    factory of its TCP connection attempts.  When the service accepts, the
    client protocol is connected to it; when it cannot be reached,
    L{failed} is called, once; L{cancel} gives up quietly.  Subclasses
    override L{failed}.

    @ivar port: the service's port.
    @ivar client: the protocol to connect; L{None} once the attempt ended
        (it keeps no reference to the connection).
    @ivar outcome: L{None} while connecting, then L{CONNECTED}, L{FAILED}
        or L{CANCELLED}.
    @ivar ipv6: whether the address tried last is ::1.
    @ivar refusal: the first address's refusal, once it refused.
    @ivar tcp: the C{IConnector} of the address being tried.
    @ivar dialler: the L{ServiceConnector} running the attempt.
    """

    noisy = False
    outcome: str | None = None
    ipv6 = False
    refusal: Failure | None = None
    tcp: Any = None
    dialler: ServiceConnector | None = None

    def __init__(self, port: int, client: IProtocol) -> None:
        self.port = port
        self.client: IProtocol | None = client

    def doStart(self) -> None:
        """
        Nothing: an attempt is no long-lived factory to count and announce.
        """

    def doStop(self) -> None:
        """
        Nothing: see L{doStart}.
        """

    def buildProtocol(self, addr: Any) -> Any:
        """
        The service accepted: hand over the client protocol.
        """
        self.outcome = CONNECTED
        client, self.client = self.client, None
        if self.dialler is not None:
            self.dialler._connected(self)
        return client

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        """
        An address did not take the connection: the dialler decides.
        """
        if self.outcome is None and self.dialler is not None:
            self.dialler._refused(self, reason)

    def fail(self, reason: Failure) -> None:
        """
        Give up connecting, with C{reason} for L{failed}.
        """
        if self.outcome is not None:
            return
        self.outcome = FAILED
        self._stop()
        self.failed(reason)

    def cancel(self, reason: object = None) -> None:
        """
        Give up connecting, if still connecting, without calling L{failed}.
        C{reason} is ignored: a splice end's C{onLost} may be this method.
        """
        if self.outcome is None:
            self.outcome = CANCELLED
            self._stop()

    def failed(self, reason: Failure) -> None:
        """
        The service could not be reached: C{reason} is the first address's
        refusal, a C{TimeoutError}, or another connection error.
        """

    def _stop(self) -> None:
        self.client = None
        tcp, self.tcp = self.tcp, None
        if self.dialler is not None:
            self.dialler._timeouts.discard(self)
        if tcp is not None:
            with suppress(error.NotConnectingError):
                tcp.stopConnecting()


class ServiceConnector:
    """
    Connects protocols to local services by port.

    @ivar timeout: the seconds each address has to accept a connection.
    @ivar preferIPv6: the ports whose service answered on ::1 (not on
        127.0.0.1).
    """

    def __init__(self, reactor: Any, timeout: float = SERVICE_CONNECT_TIMEOUT) -> None:
        self.reactor = reactor
        self.timeout = timeout
        self.preferIPv6: set[int] = set()
        self._timeouts: Timeouts[ServiceAttempt] = Timeouts(reactor, timeout, self._timedOut)

    def _endpoint(self, port: int, ipv6: bool) -> Any:
        if ipv6:
            return TCP6ClientEndpoint(self.reactor, IPV6_LOOPBACK, port, self.timeout)
        return TCP4ClientEndpoint(self.reactor, IPV4_LOOPBACK, port, self.timeout)

    # -- without Deferreds ---------------------------------------------------

    def dial(self, attempt: ServiceAttempt) -> None:
        """
        Connect C{attempt.client} to the service on C{attempt.port},
        within C{timeout} seconds an address; C{attempt} hears how it went.
        """
        attempt.dialler = self
        self._try(attempt, attempt.port in self.preferIPv6)

    def stop(self) -> None:
        """
        Disarm the timer of the attempts' timeouts; attempts in progress no
        longer time out.
        """
        self._timeouts.stop()

    def _try(self, attempt: ServiceAttempt, ipv6: bool) -> None:
        attempt.ipv6 = ipv6
        host = IPV6_LOOPBACK if ipv6 else IPV4_LOOPBACK
        # No timeout here: a DelayedCall per connection; _timeouts has one for all.
        attempt.tcp = self.reactor.connectTCP(host, attempt.port, attempt, None)
        self._timeouts.add(attempt)

    def _connected(self, attempt: ServiceAttempt) -> None:
        attempt.tcp = None
        self._timeouts.discard(attempt)
        if attempt.refusal is not None:
            self._remember(attempt.port, attempt.ipv6)

    def _refused(self, attempt: ServiceAttempt, reason: Failure) -> None:
        attempt.tcp = None
        if attempt.refusal is None and reason.check(error.ConnectionRefusedError):
            attempt.refusal = reason
            self._try(attempt, not attempt.ipv6)
            return
        attempt.fail(attempt.refusal or reason)

    def _timedOut(self, attempt: ServiceAttempt) -> None:
        attempt.fail(Failure(error.TimeoutError()))

    def _remember(self, port: int, ipv6: bool) -> None:
        if ipv6:
            self.preferIPv6.add(port)
        else:
            self.preferIPv6.discard(port)

    # -- with a Deferred -----------------------------------------------------

    def connect(self, port: int, protocol: IProtocol) -> defer.Deferred[IProtocol]:
        """
        Connect C{protocol} to the service on C{port}; the result fires
        once C{protocol} is connected; cancelling it cancels the attempt
        (and fails it with L{defer.CancelledError}).
        """
        ipv6 = port in self.preferIPv6
        d = self._endpoint(port, ipv6).connect(_One(protocol))

        def otherFamily(failure: Any) -> Any:
            failure.trap(error.ConnectionRefusedError)
            retry = self._endpoint(port, not ipv6).connect(_One(protocol))

            def remember(result: IProtocol) -> IProtocol:
                self._remember(port, not ipv6)
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


def free_local_ports(count: int) -> list[int]:
    """
    C{count} distinct TCP ports of 127.0.0.1 that nothing listens on now,
    as the OS chooses them (bind port 0, read the port): for a command the
    user is shown, which must not clash with the service's own port.
    Nothing holds them after the call.
    """
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind((IPV4_LOOPBACK, 0))
            ports.append(s.getsockname()[1])
        return ports
