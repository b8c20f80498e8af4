# -*- test-case-name: tests.udp.test_table -*-
"""
The contracts of datagram forwarding: what a L{nfltr.udp.SessionTable}
opens for each visitor address (an L{IDatagramPeer}, through an
L{IDatagramOpener}).
"""

from __future__ import annotations

from collections.abc import Callable

from zope.interface import Attribute, Interface

#: A visitor's address as UDP gives it: host and port.
Address = tuple[str, int]


class IDatagramPeer(Interface):
    """
    Where one visitor's datagrams go (a link datagram session).
    """

    dropped = Attribute("How many datagrams this peer dropped because its queue was full.")

    def send(payload: bytes) -> bool:
        """
        Send one datagram; C{False} if it was dropped (the queue is full).
        """

    def close() -> None:
        """
        End this peer: its visitor is idle or the table is closing.
        """


class IDatagramOpener(Interface):
    """
    Opens an L{IDatagramPeer} for a visitor address.
    """

    def openPeer(
        address: Address, deliver: Callable[[bytes], None], ended: Callable[[], None],
    ) -> IDatagramPeer | None:
        """
        Open a peer for the visitor at C{address}: C{deliver(payload)} for
        each datagram coming back, C{ended()} once when it ends.  C{None}
        when none can be opened now (its datagram is dropped and counted).
        """
