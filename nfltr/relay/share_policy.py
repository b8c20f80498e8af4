# -*- test-case-name: tests.relay.test_shares -*-
"""
Where the relay enforces share policies (L{nfltr.wire.policy}):

  - the allow list, when a visitor's connection is routed (before a byte
    of it reaches the agent), in every mode: L{AllowListFactory} for the
    routes the relay serves itself, L{allowed} for the spliced ones;
  - credentials, in the relay's HTTP proxy (C{inspect} and plain HTTP), as
    the proxy's gate;
  - and it refuses, at publication, a share whose credentials nobody would
    check (L{enforcement_problem}): fail closed.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import interfaces
from twisted.internet.protocol import Factory

from nfltr.wire.constants import PASSTHROUGH_NO_CREDENTIALS
from nfltr.wire.messages import E2EE, INSPECT, PASSTHROUGH, HttpShare
from nfltr.wire.policy import SharePolicy


def enforcement_problem(share: HttpShare) -> str | None:
    """
    Why C{share} cannot be published as declared, or L{None}: its
    credentials must be checked by whoever reads its requests.
    """
    kinds = set(share.auth) | set(share.policy.kinds)
    if not kinds:
        return None
    name = share.name
    if share.mode == PASSTHROUGH:
        return f"share {name}: {PASSTHROUGH_NO_CREDENTIALS}"
    if share.mode == E2EE and not share.agent_enforces:
        return f"share {name} requires credentials but its agent does not enforce them " \
               "(upgrade the agent)"
    if share.mode == INSPECT or share.plain:
        missing = sorted(kinds - set(share.policy.kinds))
        if missing:
            return f"share {name}: the relay checks its credentials but was not given " \
                   f"{', '.join(missing)}"
    return None


def allowed(policy: SharePolicy, address: Any) -> bool:
    """
    Whether a visitor from C{address} (an L{IAddress}) may connect.
    """
    return policy.allows(getattr(address, "host", None))


class AllowListFactory(Factory):
    """
    Builds the wrapped factory's protocol for allowed visitors only; for
    others it declines (L{None}), and the connection is closed.
    """

    noisy = False

    def __init__(self, wrapped: interfaces.IProtocolFactory, policy: SharePolicy) -> None:
        self.wrapped = wrapped
        self.policy = policy

    def buildProtocol(self, addr: Any) -> Any:
        """
        The wrapped protocol, or L{None} for a visitor outside the list.
        """
        if not allowed(self.policy, addr):
            return None
        return self.wrapped.buildProtocol(addr)
