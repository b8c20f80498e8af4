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
to several addresses is one address here: its C{HostnameEndpoint} tries
each of them until one answers, in an order shuffled at each resolution
(L{ShuffledNames}), so diallers given one name spread over its addresses.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from twisted.internet.interfaces import (
    IAddress,
    IHostnameResolver,
    IHostResolution,
    IReactorPluggableNameResolver,
    IReactorTCP,
    IReactorTime,
    IResolutionReceiver,
    IStreamClientEndpoint,
)
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


@implementer(IResolutionReceiver)
class _Shuffling:
    """
    Passes a resolution on to C{receiver}, its addresses in a shuffled order.
    """

    def __init__(self, receiver: IResolutionReceiver, rand: random.Random) -> None:
        self._receiver = receiver
        self._rand = rand
        self._addresses: list[IAddress] = []

    def resolutionBegan(self, resolutionInProgress: IHostResolution) -> None:
        self._receiver.resolutionBegan(resolutionInProgress)

    def addressResolved(self, address: IAddress) -> None:
        self._addresses.append(address)

    def resolutionComplete(self) -> None:
        self._rand.shuffle(self._addresses)
        for address in self._addresses:
            self._receiver.addressResolved(address)
        self._receiver.resolutionComplete()


@implementer(IHostnameResolver)
class ShufflingResolver:
    """
    A name resolver whose answers come in a shuffled order, so diallers
    given one name for several replicas spread over them (a
    C{HostnameEndpoint} tries the addresses in the order it gets them).
    """

    def __init__(self, reactor: IReactorPluggableNameResolver, rand: random.Random) -> None:
        """
        @param reactor: its C{nameResolver} resolves (read at each
            resolution: a reactor installs its resolver when it runs).
        """
        self._reactor = reactor
        self._rand = rand

    def resolveHostName(
        self, resolutionReceiver: IResolutionReceiver, hostName: str, portNumber: int = 0,
        addressTypes: Sequence[type[IAddress]] | None = None, transportSemantics: str = "TCP",
    ) -> IHostResolution:
        return self._reactor.nameResolver.resolveHostName(
            _Shuffling(resolutionReceiver, self._rand), hostName, portNumber, addressTypes,
            transportSemantics,
        )


@implementer(IReactorTCP, IReactorTime, IReactorPluggableNameResolver)
class ShuffledNames:
    """
    The reactor, for a C{HostnameEndpoint}, with a L{ShufflingResolver} over
    its name resolver.
    """

    def __init__(self, reactor: Any, rand: random.Random) -> None:
        self._reactor = reactor
        self.nameResolver: IHostnameResolver = ShufflingResolver(reactor, rand)

    def installNameResolver(self, resolver: IHostnameResolver) -> IHostnameResolver:
        previous, self.nameResolver = self.nameResolver, resolver
        return previous

    def connectTCP(self, host: str, port: int, factory: Any, timeout: float = 30,
                   bindAddress: Any = None) -> Any:
        return self._reactor.connectTCP(host, port, factory, timeout, bindAddress)

    def listenTCP(self, port: int, factory: Any, backlog: int = 50, interface: str = "") -> Any:
        return self._reactor.listenTCP(port, factory, backlog, interface)

    def seconds(self) -> float:
        return float(self._reactor.seconds())

    def callLater(self, delay: float, callable: Any, *args: object, **kwargs: object) -> Any:
        return self._reactor.callLater(delay, callable, *args, **kwargs)

    def getDelayedCalls(self) -> Any:
        return self._reactor.getDelayedCalls()
