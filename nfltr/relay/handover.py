# -*- test-case-name: tests.relay.test_handover -*-
"""
A replica of a cluster that drains hands its agents over first
(L{hand_over}; L{nfltr.relay.service.RelayService} calls it before the
drain proper): a C{moving} message (L{nfltr.wire.moving}) on each agent's
first link, then a wait until each agent drained that link itself (it did
once another replica welcomed it and its presence record names that
replica) or its link is gone, at most C{wait} seconds
(L{nfltr.relay.cluster.config.DEFAULT_HANDOVER_WAIT}).

Meanwhile nothing else changes here: the agents' links still take sessions
(this replica's public listeners are closed, but what other replicas
forward goes on arriving, and their lookups find this replica until the
new holder's record replaces its own), its presence records and its
replica link stay.  So a visitor through another replica never meets a
moment when the agent is nowhere: its session is opened here or at the
new holder.  An agent that does not move within the wait (an older agent,
or one that reaches no other replica) is drained with the rest, as
without a hand-over.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime

from nfltr.link.twisted import LinkProtocol, LinkUnavailable
from nfltr.wire.moving import moving_message

if TYPE_CHECKING:
    from .agents import Relay

#: Seconds between two looks at the agents that have not moved yet.
HANDOVER_POLL = 0.05


def _staying(link: LinkProtocol) -> bool:
    """
    Whether this relay can still open sessions on C{link} (no GOAWAY either
    way, not closed): the agent has not left it.
    """
    conn = link.connection
    return conn is not None and link.failure is None and conn.can_open()


def hand_over(relay: Relay, wait: float, clock: IReactorTime) -> Deferred[None]:
    """
    Ask every agent on a first link of C{relay}'s to move; fire once none
    stays, or after C{wait} seconds (see the module).  Never fails.
    """
    links = [h.link for h in list(relay.handlers)
             if h.agent is not None and h.link is not None and _staying(h.link)]
    if not links or wait <= 0:
        return succeed(None)
    relay.log.info("asking {count} agent(s) to move to another replica (up to {wait:g}s)",
             count=len(links), wait=wait)
    for link in links:
        with suppress(LinkUnavailable):
            link.sendControl(moving_message())
    done: Deferred[None] = Deferred()
    deadline = clock.seconds() + wait

    def look() -> None:
        staying = [link for link in links if _staying(link)]
        if not staying:
            relay.log.info("every agent moved to another replica")
        elif clock.seconds() >= deadline:
            relay.log.info("{count} agent(s) did not move within {wait:g}s: their links drain",
                     count=len(staying), wait=wait)
        else:
            clock.callLater(HANDOVER_POLL, look)
            return
        done.callback(None)

    clock.callLater(HANDOVER_POLL, look)
    return done
