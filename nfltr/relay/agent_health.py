# -*- test-case-name: tests.relay.test_groups -*-
"""
An agent's C{health} message on its link (L{nfltr.wire.health}): its
service is withdrawn (no new visitors, through any share URL, public port
or C{tcp-connect}) while its health checks fail, and restored once they
pass.  A withdrawn member of a load-balancing group leaves its visitors to
the others (L{nfltr.relay.groups}), on other replicas too: the relay tells
them when every member of a name here withdrew (L{Relay.memberHealth}).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nfltr.wire.health import parse_health
from nfltr.wire.messages import MessageError

if TYPE_CHECKING:
    from .link_handler import RelayLinkHandler


def apply_health(handler: RelayLinkHandler, message: dict[str, Any]) -> None:
    """
    Withdraw or restore the service of C{handler}'s agent, as C{message}
    says; a malformed one is ignored (logged at debug).
    """
    entry = handler.agent
    try:
        healthy = parse_health(message)
    except MessageError as e:
        handler.log.debug("ignored health message: {why}", why=str(e))
        return
    if entry is None:
        return
    health = handler.relay.directory.health
    if healthy == (not health.withdrawn(handler)):
        return
    if healthy:
        health.restore(handler)
    else:
        health.withdraw(handler)
    shares = handler.relay.shares
    handler.relay.memberHealth([entry.name], [] if shares is None else shares.heldBy(handler))
    handler.log.info(
        "agent {name} (account {account}) {what} its service",
        name=entry.name, account=entry.account,
        what="restored" if healthy else "withdrew (health checks failing)",
    )
