# -*- test-case-name: tests.agent.test_extra_links -*-
"""
An agent's extra data connections.

One TLS connection carries every session of an agent, so a busy agent is
bound by that one connection's head-of-line blocking and congestion window.
When the sessions open average L{BUSY_SESSIONS} or more per connection, the
agent dials one more link to the relay (at most L{MAX_DATA_LINKS}), bound to
its first link by the token the relay welcomed it with
(L{nfltr.wire.messages.data_hello}); the relay then opens new sessions on
whichever of the agent's links has the fewest.  Data connections are not
agents (they publish nothing and the agent limit does not count them), are
retired after L{IDLE_RETIRE} seconds without a session, and end with the
first link.  A refused or failed data connection is not retried for
L{COOLDOWN} seconds; it never stops the agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.link import DIALER, LinkConfig
from nfltr.link.twisted import LinkFactory, LinkHandler, LinkProtocol, LinkSession
from nfltr.wire.constants import MAX_DATA_LINKS
from nfltr.wire.messages import WELCOME, data_hello

#: Sessions per connection, on average, that make the agent dial another.
BUSY_SESSIONS = 8
#: Seconds a data connection may stay without a session before it is closed.
IDLE_RETIRE = 30.0
#: Seconds between two checks for idle data connections.
CHECK_EVERY = 5.0
#: Seconds to wait after a data connection failed before dialling another.
COOLDOWN = 30.0


class _DataHandler(LinkHandler):
    """
    One data connection: serves the sessions the relay opens on it.
    """

    def __init__(self, links: DataLinks) -> None:
        self.links = links

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        if message.get("type") == WELCOME:
            self.links._welcomed(link)
        else:
            self.links._failed(f"refused: {message.get('message')}")
            link.transport.loseConnection()

    def sessionRequested(self, session: LinkSession) -> None:
        self.links.serve(session)

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        self.links._lost(link)


class DataLinks:
    """
    The extra data connections of one agent.

    @ivar links: the welcomed data connections.
    @ivar primary: the agent's first link, while it is welcomed.
    """

    log = Logger()

    def __init__(
        self, endpoint: Any, clock: Any, key: str, config: LinkConfig,
        serve: Callable[[LinkSession], None], maxLinks: int = MAX_DATA_LINKS,
        busy: int = BUSY_SESSIONS,
    ) -> None:
        self.endpoint = endpoint
        self.clock = clock
        self.key = key
        self.config = config
        self.serve = serve
        self.maxLinks = maxLinks
        self.busy = busy
        self.primary: LinkProtocol | None = None
        self.links: list[LinkProtocol] = []
        self._token: str | None = None
        self._dialling = 0
        self._cooldownUntil = 0.0
        self._idleSince: dict[LinkProtocol, float] = {}
        self._check: Any = None
        # The first link each data connection was welcomed for (the relay bound it to it).
        self._primaryOf: dict[LinkProtocol, LinkProtocol] = {}

    def elsewhere(self, link: LinkProtocol) -> bool:
        """
        Whether the agent's first link is welcomed, not going away, and reaches another relay
        than C{link} (a first link, or a data connection of one) does: a visitor who connects
        again finds the agent there.
        """
        primary = self.primary
        return primary is not None and primary is not self._primaryOf.get(link, link)

    def welcomed(self, primary: LinkProtocol, token: Any) -> None:
        """
        The first link was welcomed with C{token} (no data connections if
        the relay sent none).
        """
        self.primary = primary
        self._token = token if isinstance(token, str) else None

    def primaryDown(self, drainTimeout: float = 0.0) -> None:
        """
        The first link is gone or going away: so are the data connections.  Lost: their
        sessions are reset now.  Going away (the relay drains: a GOAWAY): their sessions in
        flight may finish within C{drainTimeout} seconds, as those of the first link do (a
        share's visitor connections end at a response's end, a resumable session moves);
        resetting them would cut visitors the relay lets finish.
        """
        primary, self.primary, self._token = self.primary, None, None
        connection = primary.connection if primary is not None else None
        going = connection is not None and connection.goaway_received
        for link in list(self.links):
            link.drain(drainTimeout if going else 0)

    def sessionStarted(self) -> None:
        """
        A session started on one of the agent's links: dial another if the
        agent is busy.
        """
        primary = self.primary
        if primary is None or self._token is None or primary.connection is None:
            return
        # Connections being dialled count as there: one per busy step.
        count = 1 + len(self.links) + self._dialling
        if count - 1 >= self.maxLinks:
            return
        if self.clock.seconds() < self._cooldownUntil:
            return
        total = sum(
            link.connection.session_count for link in (primary, *self.links)
            if link.connection is not None
        )
        if total >= self.busy * count:
            self._dial()

    def stop(self, drainTimeout: float) -> defer.Deferred[Any]:
        """
        Drain and close the data connections.
        """
        self._token = None
        self._stopChecking()
        return defer.gatherResults([link.drain(drainTimeout) for link in list(self.links)])

    # -- internals ------------------------------------------------------------

    def _dial(self) -> None:
        assert self._token is not None
        self._dialling += 1
        handler = _DataHandler(self)
        factory = LinkFactory(
            DIALER, lambda: handler, self.clock, self.config, data_hello(self.key, self._token)
        )
        factory.noisy = False
        d = defer.maybeDeferred(self.endpoint.connect, factory)
        d.addBoth(self._dialled)
        d.addErrback(lambda f: self._failed(f.getErrorMessage()))

    def _dialled(self, result: Any) -> Any:
        self._dialling -= 1
        return result

    def _welcomed(self, link: LinkProtocol) -> None:
        if self.primary is None:
            link.drain(0)
            return
        self.links.append(link)
        self._primaryOf[link] = self.primary
        self.log.debug("extra data connection {count} up", count=len(self.links))
        if self._check is None:
            self._check = self.clock.callLater(CHECK_EVERY, self._retireIdle)

    def _failed(self, why: str) -> None:
        self._cooldownUntil = self.clock.seconds() + COOLDOWN
        self.log.debug("extra data connection failed: {why}", why=why)

    def _lost(self, link: LinkProtocol) -> None:
        if link in self.links:
            self.links.remove(link)
        self._idleSince.pop(link, None)
        self._primaryOf.pop(link, None)
        if not self.links:
            self._stopChecking()

    def _retireIdle(self) -> None:
        self._check = None
        now = self.clock.seconds()
        for link in list(self.links):
            busy = link.connection is not None and link.connection.session_count > 0
            if busy:
                self._idleSince.pop(link, None)
            elif now - self._idleSince.setdefault(link, now) >= IDLE_RETIRE:
                self.log.debug("retiring an idle data connection")
                self.links.remove(link)
                self._idleSince.pop(link, None)
                link.drain(0)
        if self.links:
            self._check = self.clock.callLater(CHECK_EVERY, self._retireIdle)

    def _stopChecking(self) -> None:
        if self._check is not None and self._check.active():
            self._check.cancel()
        self._check = None
