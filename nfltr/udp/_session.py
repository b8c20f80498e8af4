# -*- test-case-name: tests.udp.test_session -*-
"""
L{DatagramSession}: the protocol on a link datagram session (either end).
It frames datagrams with L{nfltr.udp._codec}, and it is the session's
streaming producer: while the link pauses it (the session's queue is at
its high-water mark, for want of credit or a full connection), each
datagram sent is dropped and counted, as UDP would, so a stalled session
never holds more than its high-water mark nor delays another session.
L{LinkDatagramOpener} opens one per visitor on a link.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import interfaces
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.link.twisted import LinkUnavailable

from ._codec import DatagramDecoder, encode_datagram
from .interfaces import Address, IDatagramOpener, IDatagramPeer


def _nothing() -> None:
    return None


@implementer(IDatagramPeer, interfaces.IPushProducer)
class DatagramSession(Protocol):
    """
    See the module.

    @ivar deliver: called with each datagram that arrives.
    @ivar ended: called once when the session ends.
    @ivar sent: datagrams written to the session.
    @ivar dropped: datagrams dropped (paused, or the session gone).
    @ivar delivered: datagrams that arrived.
    """

    # A link session (L{nfltr.link.twisted.LinkSession}), once connected.
    transport: Any

    def __init__(
        self, deliver: Callable[[bytes], None], ended: Callable[[], None] = _nothing,
    ) -> None:
        self.deliver = deliver
        self.ended = ended
        self._decoder = DatagramDecoder()
        self.paused = False
        self.open = False
        self.sent = 0
        self.dropped = 0
        self.delivered = 0

    def connectionMade(self) -> None:
        """
        Register as the session's producer.
        """
        self.open = True
        self.transport.registerProducer(self, True)

    def send(self, payload: bytes) -> bool:
        """
        See L{IDatagramPeer.send}.
        """
        if self.paused or not self.open:
            self.dropped += 1
            return False
        self.transport.write(encode_datagram(payload))
        self.sent += 1
        return True

    def close(self) -> None:
        """
        See L{IDatagramPeer.close}.
        """
        if self.open:
            self.open = False
            self.transport.unregisterProducer()
            self.transport.loseConnection()

    def dataReceived(self, data: bytes) -> None:
        """
        Deliver the datagrams C{data} completes.
        """
        for payload in self._decoder.feed(data):
            self.delivered += 1
            self.deliver(payload)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """
        Say the session ended, once.
        """
        self.open = False
        ended, self.ended = self.ended, _nothing
        ended()

    def pauseProducing(self) -> None:
        """
        The session is full: drop what is sent until resumed.
        """
        self.paused = True

    def resumeProducing(self) -> None:
        """
        The session takes datagrams again.
        """
        self.paused = False

    def stopProducing(self) -> None:
        """
        The session is going: drop everything.
        """
        self.paused = True


@implementer(IDatagramOpener)
class LinkDatagramOpener:
    """
    Opens a L{DatagramSession} with target C{targetFor(address)} on the
    link C{currentLink()} gives (C{None}: no link now).
    """

    def __init__(self, currentLink: Callable[[], Any], targetFor: Callable[[Address], str]) -> None:
        self.currentLink = currentLink
        self.targetFor = targetFor

    def openPeer(
        self, address: Address, deliver: Callable[[bytes], None], ended: Callable[[], None],
    ) -> IDatagramPeer | None:
        """
        See L{IDatagramOpener.openPeer}.
        """
        link = self.currentLink()
        if link is None:
            return None
        session = DatagramSession(deliver, ended)
        try:
            link.openSession(self.targetFor(address), session)
        except LinkUnavailable:
            return None
        return session
