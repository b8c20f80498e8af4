# -*- test-case-name: tests.relay.test_metrics -*-
"""
What the relay counts as it works, for its metrics (L{nfltr.relay.metrics}):
plain integers bumped on the reactor thread, each keyed by a closed set of
labels, so a metric's cardinality is fixed by the code, not by visitors.
"""

from __future__ import annotations

from nfltr.link import RefusalReason

#: Session kinds: a client's TCP session, a share visitor's spliced
#: connection, a connection of the relay's HTTP proxy to an agent.
TCP, SHARE, HTTP = "tcp", "share", "http"
KINDS = (TCP, SHARE, HTTP)
#: How routing a session ended.
ROUTED = "routed"
NOT_FOUND = "not_found"
NOT_ALLOWED = "not_allowed"
AGENT_UNAVAILABLE = "agent_unavailable"
OUTCOMES = (ROUTED, NOT_FOUND, NOT_ALLOWED, AGENT_UNAVAILABLE)


class RelayCounters:
    """
    The relay's running totals.

    @ivar sessions: sessions by (kind, outcome).
    @ivar refusals: dialers turned away, by refusal reason.
    @ivar agentConnects: agents welcomed (reconnections included).
    @ivar closedBytesIn: link bytes read by links that have ended.
    @ivar closedBytesOut: link bytes written by links that have ended.
    """

    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], int] = {
            (kind, outcome): 0 for kind in KINDS for outcome in OUTCOMES
        }
        self.refusals: dict[str, int] = {reason.value: 0 for reason in RefusalReason}
        self.agentConnects = 0
        self.closedBytesIn = 0
        self.closedBytesOut = 0

    def session(self, kind: str, outcome: str) -> None:
        """
        Count one session of C{kind} routed with C{outcome}.
        """
        self.sessions[kind, outcome] += 1
