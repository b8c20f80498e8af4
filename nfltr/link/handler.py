# -*- test-case-name: tests.link.test_twisted -*-
"""
What an application gives a L{LinkProtocol}: an L{ILinkHandler} for the
link's events (L{LinkHandler}, a base that refuses every session), and the
L{LinkUnavailable} error of a link that cannot open a session now (and its
L{LinkOverloaded} case).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.python.failure import Failure
from zope.interface import Interface, implementer

from ._errors import ErrorCode

if TYPE_CHECKING:
    from .transport import LinkSession
    from .twisted import LinkProtocol


class LinkUnavailable(Exception):
    """
    No session can be opened on this link now (not yet established, going
    away, or at the peer's session limit).

    @ivar code: the error code that tells a peer why, when this refusal is
        passed on as a RESET.
    """

    code: int = ErrorCode.GOING_AWAY


#: Why a link at its process's limit of unsent bytes refuses a session (L{LinkOverloaded}).
OVERLOADED_REASON = "the relay holds its limit of unsent link bytes: retry later"


class LinkOverloaded(LinkUnavailable):
    """
    The process holds its limit of unsent link bytes
    (L{nfltr.link.memory.LinkMemory}) and this link more than its share: no
    new session on it now.
    """

    code = ErrorCode.OVERLOADED


class ILinkHandler(Interface):
    """
    What the application does with a link's events.
    """

    def linkEstablished(link: LinkProtocol) -> None:
        """
        The peer's hello arrived (C{link.peerHello}).
        """

    def sessionRequested(session: LinkSession) -> None:
        """
        The peer opened C{session}: call C{session.accept(protocol)} or
        C{session.refuse(code, reason)}, now or later.
        """

    def controlReceived(link: LinkProtocol, message: dict[str, Any]) -> None:
        """
        An application control message arrived.
        """

    def linkGoingAway(link: LinkProtocol) -> None:
        """
        The peer sent a GOAWAY without an error: it takes no new sessions,
        and those in flight may finish.
        """

    def linkLost(link: LinkProtocol, reason: Failure) -> None:
        """
        The link's connection is gone.
        """


@implementer(ILinkHandler)
class LinkHandler:
    """
    A handler that refuses every session and ignores control messages;
    subclass what you need.
    """

    def linkEstablished(self, link: LinkProtocol) -> None:
        """
        Nothing to do.
        """

    def sessionRequested(self, session: LinkSession) -> None:
        """
        Refuse.
        """
        session.refuse(ErrorCode.REFUSED, "no sessions accepted here")

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        """
        Ignore.
        """

    def linkGoingAway(self, link: LinkProtocol) -> None:
        """
        Nothing to do.
        """

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        """
        Nothing to do.
        """
