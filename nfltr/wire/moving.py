# -*- test-case-name: tests.relay.test_handover,tests.agent.test_dialler -*-
"""
The C{moving} control message: a replica of a cluster that drains asks
each of its agents to move to another replica before it drains their links
(L{nfltr.relay.handover}), so that no visitor meets the gap between the
old link's GOAWAY and the new link's welcome.

  - C{{"type": "moving"}}: from the relay, on an agent's welcomed link.  The
    link still takes sessions; the agent dials another relay at once and,
    once welcomed there and L{MOVE_GRACE} seconds later (what other
    replicas routed here before the new holder's presence record reached
    them arrives meanwhile), drains this link itself with a GOAWAY.

An agent that does not know the message ignores it (as every control
message it does not know); the relay then drains its link after its wait
(L{nfltr.relay.handover}), as it would without asking.
"""

from __future__ import annotations

from typing import Any

MOVING = "moving"
#: Seconds an agent keeps taking sessions on the link of a relay that asked
#: it to move, after another relay welcomed it.
MOVE_GRACE = 1.0


def moving_message() -> dict[str, Any]:
    """
    The C{moving} message.
    """
    return {"type": MOVING}
