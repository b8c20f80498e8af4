# -*- test-case-name: tests.agent.test_relays -*-
"""
L{RelayAddresses}: the endpoint to a relay given as several addresses (the
replicas of one relay, C{--relay A,B,C}).

It connects to one address at a time, the I{current} one, so that every
link of a dialler (its main link and its extra data links) reaches the same
replica.  The addresses are taken in an order shuffled once, so agents given
the same list spread over the replicas; the dialler moves to the next
(L{RelayAddresses.advance}) when an attempt fails, when its link is lost and
when the relay sends a GOAWAY (it is draining).  A host name that resolves
to several addresses is one address here: C{HostnameEndpoint} tries each of
them until one answers.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from twisted.internet.interfaces import IStreamClientEndpoint
from zope.interface import Attribute, Interface, implementer


class IRelayChoice(Interface):
    """
    An endpoint that reaches a relay at one of several addresses.
    """

    where: str = Attribute("the current address, HOST:PORT, for messages")
    count: int = Attribute("how many addresses there are")

    def advance() -> None:
        """
        Use the next address for the connections to come.
        """


@implementer(IStreamClientEndpoint, IRelayChoice)
class RelayAddresses:
    """
    Connects to the current one of several relay addresses.

    @ivar order: the addresses (each C{HOST:PORT} and its endpoint) in the
        order they are tried.
    """

    def __init__(self, endpoints: Sequence[tuple[str, Any]], rand: random.Random) -> None:
        """
        @param endpoints: each address, C{HOST:PORT}, with the endpoint that
            reaches it (at least one).
        @param rand: shuffles the order once.
        """
        if not endpoints:
            raise ValueError("a relay needs at least one address")
        self.order = list(endpoints)
        rand.shuffle(self.order)
        self._index = 0

    @property
    def where(self) -> str:
        return str(self.order[self._index][0])

    @property
    def count(self) -> int:
        return len(self.order)

    def advance(self) -> None:
        self._index = (self._index + 1) % len(self.order)

    def connect(self, protocolFactory: Any) -> Any:
        return self.order[self._index][1].connect(protocolFactory)
