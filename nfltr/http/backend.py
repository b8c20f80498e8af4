# -*- test-case-name: tests.http.test_pool -*-
"""
The backend side of the HTTP proxy: an L{IBackend} connects a given
protocol to the backend (the agent's local service, or the agent over a
link session); L{FunctionBackend} and L{EndpointBackend} make one from a
function or an endpoint.

A L{BackendConnection} is the protocol on each backend connection: it keeps
the connection's h11 client state across the requests it serves and passes
what it reads to its current L{BackendUser} (a visitor connection's proxy),
or after a switch of protocols to a splice end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import Protocol as TypingProtocol

import h11
from twisted.internet import defer, error, interfaces
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from ._limits import DEFAULT_LIMITS, HTTPLimits
from .flow import Valve


class IBackend(TypingProtocol):
    """
    A way to reach the backend.
    """

    def connect(self, protocol: interfaces.IProtocol) -> defer.Deferred[Any]:
        """
        Connect C{protocol} to the backend.

        @return: fires once C{protocol} is connected, fails if it cannot
            be; cancelling it cancels the attempt.
        """


class FunctionBackend:
    """
    An L{IBackend} from a function that connects a protocol, such as
    C{functools.partial(serviceConnector.connect, port)}.
    """

    def __init__(self, connect: Callable[[interfaces.IProtocol], defer.Deferred[Any]]) -> None:
        self._connect = connect

    def connect(self, protocol: interfaces.IProtocol) -> defer.Deferred[Any]:
        """
        Connect C{protocol} with the function.
        """
        return self._connect(protocol)


class _Given(Factory):
    """
    Builds one given protocol, quietly.
    """

    noisy = False

    def __init__(self, protocol: interfaces.IProtocol) -> None:
        self.given = protocol

    def buildProtocol(self, addr: Any) -> Any:
        """
        The protocol.
        """
        return self.given


class EndpointBackend:
    """
    An L{IBackend} that connects through a client endpoint.
    """

    def __init__(self, endpoint: interfaces.IStreamClientEndpoint) -> None:
        self.endpoint = endpoint

    def connect(self, protocol: interfaces.IProtocol) -> defer.Deferred[Any]:
        """
        Connect C{protocol} through the endpoint.
        """
        return self.endpoint.connect(_Given(protocol))


class BackendUser(TypingProtocol):
    """
    What a L{BackendConnection} tells the one using it.
    """

    def backendData(self, data: bytes) -> None:
        """
        Bytes from the backend.
        """

    def backendEOF(self) -> None:
        """
        The backend's end of input.
        """

    def backendLost(self, reason: Failure) -> None:
        """
        The connection is gone.
        """


@implementer(interfaces.IHalfCloseableProtocol)
class BackendConnection(Protocol):
    """
    The protocol of one connection to the backend.

    @ivar client: the connection's h11 state (we are the client).
    @ivar user: who reads from it now; C{None} while idle.
    @ivar raw: after a switch of protocols, the splice end everything goes to.
    @ivar valve: pauses its reading for several reasons.
    @ivar reused: it was handed out from the pool (it served before).
    @ivar ended: its end of input was read.
    @ivar closed: it is gone.
    @ivar onLost: called with it once it is gone.
    """

    transport: Any
    log = Logger()

    def __init__(self, limits: HTTPLimits = DEFAULT_LIMITS) -> None:
        self.client = h11.Connection(h11.CLIENT, max_incomplete_event_size=limits.responseHeadSize)
        self.user: BackendUser | None = None
        self.raw: Any = None
        self.valve: Valve | None = None
        self.reused = False
        self.ended = False
        self.closed = False
        self.onLost: Callable[[BackendConnection], None] | None = None

    def connectionMade(self) -> None:
        """
        Ask for no delay on a TCP connection.
        """
        self.valve = Valve(self.transport)
        setNoDelay = getattr(self.transport, "setTcpNoDelay", None)
        if setNoDelay is not None:
            setNoDelay(True)

    @property
    def usable(self) -> bool:
        """
        Whether it can carry a new request: connected, open both ways, idle.
        """
        return bool(
            self.connected and not self.closed and not self.ended and self.user is None
            and self.raw is None and not getattr(self.transport, "disconnecting", False)
            and self.client.our_state is h11.IDLE and self.client.their_state is h11.IDLE
        )

    def dataReceived(self, data: bytes) -> None:
        """
        To the user; bytes while idle are a server error: abort.
        """
        if self.raw is not None:
            self.raw.dataReceived(data)
        elif self.user is not None:
            self.user.backendData(data)
        else:
            self.log.debug("bytes from an idle backend connection: aborting it")
            self.abort()

    def readConnectionLost(self) -> None:
        """
        End of input: to the user; while idle, close.
        """
        self.ended = True
        if self.raw is not None:
            self.raw.readConnectionLost()
        elif self.user is not None:
            self.user.backendEOF()
        else:
            self.close()

    def writeConnectionLost(self) -> None:
        """
        Our write side is shut (after a switch of protocols).
        """
        if self.raw is not None:
            self.raw.writeConnectionLost()

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Gone: tell the user or the splice, and the pool.
        """
        self.closed = True
        if self.raw is not None:
            self.raw.connectionLost(reason)
        elif self.user is not None:
            self.user.backendLost(reason)
        if self.onLost is not None:
            self.onLost(self)

    def close(self) -> None:
        """
        Close after what was written.
        """
        if self.connected and not self.closed:
            self.transport.loseConnection()

    def abort(self) -> None:
        """
        Abort at once.
        """
        if self.connected and not self.closed:
            self.transport.abortConnection()
