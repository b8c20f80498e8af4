"""
Tests for L{nfltr.agent._shares}: a share's visitor connections whose relay
drains end at a response's end (L{nfltr.http.IDrainable}) once a later link
to the relay was welcomed, never before.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.agent._shares import HttpOption, ShareServer
from nfltr.http import IDrainable
from nfltr.link.twisted import LinkSession
from nfltr.wire.messages import INSPECT

from ..link.twisted_helpers import LinkPair, RecordingHandler


@implementer(IDrainable)
class Connection(Protocol):
    """
    A visitor connection's proxy that counts how often it was drained.
    """

    drained = 0

    def drain(self) -> None:
        self.drained += 1


class Proxies:
    """
    Makes a L{Connection} for each visitor connection, in place of the
    share's HTTP proxy factory.
    """

    def __init__(self) -> None:
        self.made: list[Connection] = []

    def proxyFor(self, visitor: str | None, backend: Any = None) -> Connection:
        self.made.append(Connection())
        return self.made[-1]


class Serving(RecordingHandler):
    """
    The agent's side of a link: each session goes to the share.
    """

    def __init__(self, server: ShareServer) -> None:
        super().__init__()
        self.server = server

    def sessionRequested(self, session: LinkSession) -> None:
        self.sessions.append(session)
        self.server.serveRelayed(session)


class DrainTests(SynchronousTestCase):
    """
    A relay's GOAWAY and the agent's next welcome, in either order.
    """

    def setUp(self) -> None:
        self.server = ShareServer("blog", HttpOption(3000, INSPECT), object(), Clock(), None)
        self.proxies = Proxies()
        self.server.relayed = self.proxies
        self.pair = LinkPair(dialerHandler=Serving(self.server))

    def visit(self) -> Connection:
        """
        A visitor connection through the relay (the link's listener).
        """
        self.pair.listener.openSession("http:blog", Protocol())
        self.pair.run()
        connection = self.proxies.made[-1]
        self.assertTrue(verifyObject(IDrainable, connection))
        return connection

    def test_goawayThenWelcome(self) -> None:
        """
        A GOAWAY before the agent's next welcome (its new link is not up
        yet) leaves the visitor's connection alone; the welcome drains it,
        once.
        """
        connection = self.visit()
        self.pair.listener.drain()
        self.pair.run()
        self.assertEqual(connection.drained, 0)
        self.server.relayWelcomed()
        self.server.relayWelcomed()
        self.assertEqual(connection.drained, 1)

    def test_welcomeThenGoaway(self) -> None:
        """
        A GOAWAY that comes after a later welcome (a data link's, after the
        main link moved) drains the visitor's connection at once.
        """
        connection = self.visit()
        self.server.relayWelcomed()
        self.pair.listener.drain()
        self.pair.run()
        self.assertEqual(connection.drained, 1)

    def test_noGoaway(self) -> None:
        """
        A welcome alone (a link lost and made again) drains nothing.
        """
        connection = self.visit()
        self.server.relayWelcomed()
        self.assertEqual(connection.drained, 0)
