"""
Tests for L{nfltr.agent._shares}: a share's visitor connections whose relay
drains end at a response's end (L{nfltr.http.IDrainable}) once another
relay welcomed the agent's first link (L{nfltr.agent._extra_links.DataLinks.elsewhere}),
never before; and a share that retires (L{ShareServer.retire}): its
pools, and its sessions (L{nfltr.agent._visits}), drained and then reset.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.agent._extra_links import DataLinks
from nfltr.agent._shares import H2C, HttpOption, ShareServer
from nfltr.agent._visits import FIRST_PRUNE, RETIRED_REASON, Visits
from nfltr.http import IDrainable
from nfltr.link import ErrorCode, LinkConfig
from nfltr.link.twisted import LinkSession
from nfltr.wire.messages import E2EE, INSPECT

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
    The agent's side of a link: each session goes to the share; a GOAWAY on
    a first link takes it from the data links, as the agent's dialler does.
    """

    def __init__(self, server: ShareServer, data: DataLinks, first: bool = True) -> None:
        super().__init__()
        self.server, self.data, self.first = server, data, first

    def sessionRequested(self, session: LinkSession) -> None:
        self.sessions.append(session)
        self.server.serveRelayed(session)

    def linkGoingAway(self, link: Any) -> None:
        super().linkGoingAway(link)
        if self.first:
            self.data.primaryDown(30.0)


class DrainTests(SynchronousTestCase):
    """
    A relay's GOAWAY and the agent's welcome by another relay, in every
    order, on the first link and on a data link.
    """

    def setUp(self) -> None:
        self.server = ShareServer("blog", HttpOption(3000, INSPECT), object(), Clock(), None)
        self.proxies = Proxies()
        self.server.relayed = self.proxies
        self.data = DataLinks(None, Clock(), "KEY", LinkConfig(), lambda s: None)
        self.server.elsewhere = self.data.elsewhere
        self.old = self.relay()

    def relay(self, first: bool = True) -> LinkPair:
        """
        A link to a relay (its listener), welcomed: the first link, or a
        data connection of the first link.
        """
        pair = LinkPair(dialerHandler=Serving(self.server, self.data, first))
        if first:
            self.data.welcomed(pair.dialer, "TOKEN")
            self.server.relayWelcomed()
        else:
            self.data._welcomed(pair.dialer)
        return pair

    def visit(self, pair: LinkPair) -> Connection:
        """
        A visitor connection through the relay of C{pair}.
        """
        pair.listener.openSession("http:blog", Protocol())
        pair.run()
        connection = self.proxies.made[-1]
        self.assertTrue(verifyObject(IDrainable, connection))
        return connection

    def goaway(self, pair: LinkPair) -> None:
        """
        The relay of C{pair} drains.
        """
        pair.listener.drain()
        pair.run()

    def test_goawayThenWelcome(self) -> None:
        """
        A GOAWAY before another relay welcomed the agent leaves the
        visitor's connection alone; that welcome drains it, once.
        """
        connection = self.visit(self.old)
        self.goaway(self.old)
        self.assertEqual(connection.drained, 0)
        self.relay()
        self.server.relayWelcomed()
        self.assertEqual(connection.drained, 1)

    def test_dataLinkFirst(self) -> None:
        """
        A data connection's GOAWAY that comes before its first link's (the
        agent's first link still reaches the relay that drains) waits for
        another relay's welcome.
        """
        data = self.relay(first=False)
        connection = self.visit(data)
        self.goaway(data)
        self.assertEqual(connection.drained, 0)
        self.goaway(self.old)
        self.assertEqual(connection.drained, 0)
        self.relay()
        self.assertEqual(connection.drained, 1)

    def test_dataLinkLate(self) -> None:
        """
        A visitor connection on a data connection whose GOAWAY comes after
        another relay welcomed the agent is drained at once.
        """
        data = self.relay(first=False)
        connection = self.visit(data)
        self.goaway(self.old)
        self.relay()
        self.assertEqual(connection.drained, 0)
        self.goaway(data)
        self.assertEqual(connection.drained, 1)

    def test_noGoaway(self) -> None:
        """
        A welcome alone (a link lost and made again) drains nothing.
        """
        connection = self.visit(self.old)
        self.relay()
        self.assertEqual(connection.drained, 0)


class _Session:
    """
    A visitor session for L{Visits}: whether it ended, how it was reset.
    """

    disconnected = False
    reset: tuple[int, str] | None = None

    def abortWith(self, code: int, reason: str) -> None:
        self.reset = (code, reason)
        self.disconnected = True


class VisitsTests(SynchronousTestCase):
    """
    L{Visits}: a share's visitor sessions, drained and then reset when the
    share retires.
    """

    def test_drainThenAbort(self) -> None:
        """
        L{Visits.drain} drains the proxies of the sessions still open (a
        splice has none); L{Visits.abort} resets those sessions, and only
        those, with the reason.
        """
        visits = Visits()
        http, splice, ended = _Session(), _Session(), _Session()
        proxies = [Connection(), Connection()]
        visits.add(http, proxies[0])
        visits.add(splice)
        visits.add(ended, proxies[1])
        ended.disconnected = True
        visits.drain()
        self.assertEqual([p.drained for p in proxies], [1, 0])
        visits.abort()
        self.assertEqual([s.reset for s in (http, splice, ended)],
                         [(ErrorCode.CANCEL, RETIRED_REASON)] * 2 + [None])
        self.assertEqual(len(visits), 0)

    def test_endedLetGo(self) -> None:
        """
        Sessions that ended are let go as new ones come: however many come
        and go, it holds no more than twice those open, or L{FIRST_PRUNE}.
        """
        visits = Visits()
        kept = [_Session() for _ in range(10)]
        for session in kept:
            visits.add(session)
        for _ in range(1000):
            gone = _Session()
            visits.add(gone)
            gone.disconnected = True
            self.assertLessEqual(len(visits._sessions), max(FIRST_PRUNE, 2 * len(kept)) + 1)
        self.assertEqual([s for s, _ in visits.live()], kept)


class RetireTests(SynchronousTestCase):
    """
    L{ShareServer.retire}: what a share that a reload removed or changed
    lets go at once.
    """

    def test_h2cPool(self) -> None:
        """
        An e2ee share of an h2c service retires its pool of h2c connections
        (no new one is made; those made close once their streams are done)
        and closes its pool of HTTP/1.1 connections, and drains its visitor
        connections.
        """
        server = ShareServer("blog", HttpOption(3000, E2EE, service_protocol=H2C), object(),
                             Clock(), None)
        connection = Connection()
        server.visits.add(_Session(), connection)
        assert server.proxy is not None and server.proxy.services is not None
        assert server.pool is not None
        server.retire()
        self.assertTrue(server.proxy.services.closed)
        self.assertTrue(server.pool.closed)
        self.assertEqual(connection.drained, 1)
