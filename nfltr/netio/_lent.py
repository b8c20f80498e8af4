# -*- test-case-name: tests.test_tls_batching -*-
"""
L{ITransientReader}: a protocol its transport may lend what it read,
instead of giving it a copy.

nfltr's batching TLS (L{nfltr.tls.BatchingTLSProtocol}) decrypts a read
into one buffer of the process, which it reuses.  Handing the plaintext on
as C{bytes} costs a copy of every byte; a protocol that provides this
interface is lent a view of the buffer instead, when it is read whole
into it, and copies what it keeps itself (the link's codec copies each
session's bytes once anyway: L{nfltr.link.LinkConnection}).
"""

from __future__ import annotations

from zope.interface import Interface


class ITransientReader(Interface):
    """
    A protocol that can be lent its input.
    """

    def transientDataReceived(data: memoryview) -> None:
        """
        What C{dataReceived(bytes(data))} would do.  C{data} is lent: a
        view of a buffer that the next read of any connection of the
        process overwrites, so the protocol keeps no reference to it, and
        copies what it needs before it calls anything that may read (it
        hands its application copies, never the view).
        """
