# -*- test-case-name: tests.relay.test_names -*-
"""
Who may hold a name on this relay: one rule for agent names and share
names.

A name is leased to an account (L{nfltr.relay.leases}, one table for both
kinds): while one of the account's agents (a native agent's link, an SSH
connection) holds it as its agent name or publishes it as a share, and for
the lease time (C{--lease-time}) after the last of them left.  Meanwhile no
other account can take it, as an agent name or as a share name, whether the
holder is connected or only its lease lives.  L{check_name_free} is that
check; the share registry calls it for every share, and
L{check_agent_claim} (through L{nfltr.relay.agents.Relay.admitAgent}) for
every agent name, on the native link path and the SSH path alike.

Within an account, a newer holder (L{nfltr.relay.interfaces.IAgentHolder}:
a native agent's link, an SSH connection) that takes a name over, as its
agent name or as a share, replaces the holder that had it, whatever the
kinds of the two: the older one is refused with C{conflict} L{REPLACED}
(L{nfltr.relay.agents.Relay} does it, the one place holders claim names).
Only an SSH connection's agent name never replaces a connected agent
(L{name_connected_message}).

Names are public, like share URLs: anyone with a key can learn that a name
is taken by trying it.  What the refusal never tells is who holds it, or
whether its agent is connected: it is the same words (L{name_taken_message})
for a connected holder and a lease alone, for an agent name and a share
name.
"""

from __future__ import annotations

from nfltr.link import RefusalReason

from .directory import AgentEntry, Directory
from .leases import ILeases, NameLeased

#: What a holder is told when a newer holder of its account takes one of its
#: names (its agent name or a share's) over.
REPLACED = "replaced by a newer connection"


class ClaimRefused(Exception):
    """
    A name (or what comes with it) cannot be had; the text says why, for the
    agent.

    @ivar reason: the refusal's reason on the wire.
    """

    def __init__(self, reason: RefusalReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def name_taken_message(name: str) -> str:
    """
    The refusal for a name another account holds: the same for agent names
    and share names, whether the holder is connected or only holds the lease.
    """
    kind, colon, port = name.partition(":")
    if colon and kind == "port":  # a public port's lease (nfltr.relay.public_ports)
        return f"public port {port} is leased to another account"
    return f"name {name} is leased to another account"


def check_name_free(leases: ILeases, name: str, account: str, now: float) -> None:
    """
    The one ownership rule: C{account} may take C{name} at C{now} unless
    another account holds its lease.

    @raise ClaimRefused: C{conflict}, L{name_taken_message}.
    """
    try:
        leases.check(name, account, now)
    except NameLeased:
        raise ClaimRefused(RefusalReason.CONFLICT, name_taken_message(name)) from None


def agent_limit_message(limit: int) -> str:
    """
    The refusal an agent gets when the relay holds its most agents.
    """
    return f"the relay's agent limit is reached ({limit} agents, --max-agents)"


def name_connected_message(name: str) -> str:
    """
    The refusal a claim that may not replace a connected agent (an SSH
    connection's) gets for a name its own account's agent holds; only that
    account hears it.
    """
    return f"agent name {name} is connected already (another agent or SSH connection of " \
        "your account)"


def check_agent_claim(
    directory: Directory, entry: AgentEntry, now: float, maxAgents: int | None,
    replace: bool = True,
) -> None:
    """
    Whether C{entry} may take its name at C{now}: the ownership rule
    (L{check_name_free}) first, so that a name another account holds is
    refused in the same words whatever else is true; then, with C{replace}
    false, no live agent of the account under the name but C{entry}'s own
    holder; then, for a name no live agent holds (or a new member of its
    group), room under C{maxAgents} (L{None}: no limit).

    @raise ClaimRefused: why not.
    """
    check_name_free(directory.leases, entry.name, entry.account, now)
    live = directory.agent(entry.name)
    if live is not None and not replace and live.holder is not entry.holder:
        raise ClaimRefused(RefusalReason.CONFLICT, name_connected_message(entry.name))
    adds = live is None or directory.joins(entry)  # a group's new member is one more agent
    if maxAgents is not None and adds and directory.counts()[0] >= maxAgents:
        raise ClaimRefused(RefusalReason.LIMIT, agent_limit_message(maxAgents))
