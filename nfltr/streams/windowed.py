# -*- test-case-name: tests.streams.test_windowed -*-
"""
L{WindowedStream}: the writer's side shared by nfltr's windowed stream
transports (L{nfltr.link.transport.LinkSession} and
L{nfltr.ssh.channel.ForwardChannel}).

Each of them is an C{IConsumer} of the bytes written to it: a producer
registered on it is paused while what waits beyond the peer's credit is
over the transport's high-water mark, and resumed when it drains.  That
logic lives here once, so a backpressure fix reaches every transport.

A pull producer (C{streaming=False}) is asked for more one reactor turn
after each write that left room, through the adapter's C{_callSoon}.  An
adapter without a clock sets C{supportsPull = False}: its pull producers
are then paused and resumed like push producers, which is what such a
producer's C{resumeProducing} expects anyway.

What stays per adapter: how bytes leave (link frames or SSH packets), where
the backlog is kept and measured (the link's send queue or the channel's),
how credit goes back to the peer, and how each end is signalled on the wire.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from zope.interface import Interface


class IAcceptedSession(Interface):
    """
    A stream opened towards an agent that can tell when the agent took it
    (L{nfltr.link.transport.LinkSession}: the link's C{ACCEPT}; an SSH
    channel of C{ssh -R}: at once).
    """

    def whenAccepted() -> Deferred[None]:
        """
        Fires once the far end took the stream (at once where it cannot
        tell), or fails with what ended it first (its refusal); cancelling
        it resets the stream.
        """


class WindowedStream:
    """
    The producer registration of a windowed stream transport.

    Adapters call L{_pauseProducer} when a write left the backlog over high
    water, and L{writable} when it fell back below the low-water mark.

    @ivar _producer: the producer registered on this transport, if any.
    @ivar _streaming: it is a push producer (or is treated as one).
    @ivar _producerPaused: this transport paused it and has not resumed it.
    @ivar _pullScheduled: a pull producer will be asked for more soon.
    """

    # In slots: a link session, one per session of a link, keeps all its
    # state in slots (no instance dictionary).
    __slots__ = ("_producer", "_streaming", "_producerPaused", "_pullScheduled")

    supportsPull = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._producer: Any = None
        self._streaming = True
        self._producerPaused = False
        self._pullScheduled = False
        # Cooperative: an adapter's other base (an SSH channel) takes the rest.
        super().__init__(*args, **kwargs)

    def _streamGone(self) -> bool:
        """
        Whether the stream has ended: a producer registered then is stopped.
        """
        raise NotImplementedError

    def _sendBacklogged(self) -> bool:
        """
        Whether bytes wait for credit, so a new producer starts paused.
        """
        return False

    def _callSoon(self, f: Any) -> None:
        """
        Call C{f} on a later reactor turn (needed when L{supportsPull}).
        """
        raise NotImplementedError

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """
        Pause C{producer} while what waits for the peer's credit is over
        the high-water mark.
        """
        if self._producer is not None:
            raise RuntimeError(f"{self!r} already has a producer")
        if self._streamGone():
            producer.stopProducing()
            return
        self._producer = producer
        self._streaming = bool(streaming) or not self.supportsPull
        self._producerPaused = False
        if not self._streaming:
            self._schedulePull()
        elif self._sendBacklogged():
            self._pauseProducer()

    def unregisterProducer(self) -> None:
        """
        Forget the producer.
        """
        self._producer = None
        self._streaming = True
        self._producerPaused = False

    def _pauseProducer(self) -> None:
        if self._producer is not None and self._streaming and not self._producerPaused:
            self._producerPaused = True
            self._producer.pauseProducing()

    def writable(self) -> None:
        """
        The backlog fell below the low-water mark: resume the producer (or
        ask a pull producer for more).
        """
        if self._producer is None:
            return
        if not self._streaming:
            self._schedulePull()
        elif self._producerPaused:
            self._producerPaused = False
            self._producer.resumeProducing()

    def _schedulePull(self) -> None:
        if not self._pullScheduled:
            self._pullScheduled = True
            self._callSoon(self._pull)

    def _pull(self) -> None:
        self._pullScheduled = False
        if self._producer is not None and not self._streaming and not self._streamGone():
            self._producer.resumeProducing()
