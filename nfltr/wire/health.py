# -*- test-case-name: tests.wire.test_health -*-
"""
The C{health} control message: an agent whose health checks fail
(L{nfltr.agent._health}) withdraws its service, and restores it once they
pass, on the link it has.

An agent sends it only to a relay whose welcome listed the C{health}
feature (L{nfltr.wire.messages.AGENT_FEATURES}); an older relay lists no
such feature, and ignores control messages it does not know, so an agent
that speaks to one keeps serving and says that it cannot withdraw.

  - C{{"type": "health", "healthy": false}}: give this link's agent no new
    visitors (sessions in flight go on);
  - C{{"type": "health", "healthy": true}}: take visitors again.

The relay does not answer.
"""

from __future__ import annotations

from typing import Any

from .messages import MessageError

HEALTH = "health"
#: The welcome's feature that says the relay takes C{health}.
FEATURE = "health"
#: The welcome's feature that says the relay takes a hello's C{group}.
GROUPS_FEATURE = "groups"


def health_message(healthy: bool) -> dict[str, Any]:
    """
    The C{health} message saying whether the agent's service is C{healthy}.
    """
    return {"type": HEALTH, "healthy": healthy}


def parse_health(message: dict[str, Any]) -> bool:
    """
    Whether a C{health} message says the service is healthy.

    @raise MessageError: C{healthy} is missing or not a boolean.
    """
    healthy = message.get("healthy")
    if not isinstance(healthy, bool):
        raise MessageError("health: healthy must be true or false")
    return healthy
