"""
Behaviour tests of L{nfltr.streams.windowed.WindowedStream}, written once
and run against each adapter (a link session, an SSH forward channel).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.protocol import Protocol
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import LinkConfig
from tests.link.twisted_helpers import LinkPair, RecordingHandler
from tests.ssh.test_channel import Producer, opened


class WriterMixin:
    """
    The writer's producer, for any adapter: C{make()} returns a transport
    with the peer granting no credit, and C{grant()} opens it wide.
    """

    def make(self) -> Any:
        raise NotImplementedError

    def grant(self) -> None:
        raise NotImplementedError

    def test_pausedOverHighWaterResumedWhenDrained(self: Any) -> None:
        """
        A streaming producer is paused once a write leaves the backlog over
        high water, and resumed when the peer's credit drains it.
        """
        transport = self.make()
        producer = Producer()
        transport.registerProducer(producer, True)
        transport.write(b"x" * self.over)
        self.assertTrue(producer.paused)
        self.grant()
        self.assertFalse(producer.paused)

    def test_registerTwiceRefused(self: Any) -> None:
        """
        A second producer is refused while one is registered; after
        C{unregisterProducer} another may register.
        """
        transport = self.make()
        transport.registerProducer(Producer(), True)
        self.assertRaises(RuntimeError, transport.registerProducer, Producer(), True)
        transport.unregisterProducer()
        transport.registerProducer(Producer(), True)

    def test_registerAfterEndStops(self: Any) -> None:
        """
        A producer registered on a transport that has ended is stopped.
        """
        transport = self.make()
        transport.abortConnection()
        stopped: list[bool] = []
        producer = Producer()
        producer.stopProducing = lambda: stopped.append(True)  # type: ignore[method-assign]
        transport.registerProducer(producer, True)
        self.assertEqual(stopped, [True])


class LinkWriterTests(WriterMixin, SynchronousTestCase):
    """
    L{WriterMixin} on a link session.
    """

    over = 4 * 64 * 1024

    def make(self) -> Any:
        self.pair = LinkPair(
            listenerHandler=RecordingHandler(lambda s: Protocol()),
            config=LinkConfig(session_window=64 * 1024),
        )
        session = self.pair.dialer.openSession("x", Protocol())
        self.pair.run()
        return session

    def grant(self) -> None:
        self.pair.run()


class SSHWriterTests(WriterMixin, SynchronousTestCase):
    """
    L{WriterMixin} on an SSH forward channel.
    """

    over = 1024

    def make(self) -> Any:
        self.channel, _conn, _protocol = opened(remoteWindow=0)
        return self.channel

    def grant(self) -> None:
        self.channel.addWindowBytes(64 * 1024)
