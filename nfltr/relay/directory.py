# -*- test-case-name: tests.relay.test_directory -*-
"""
Who is connected to this relay: agents by name, and every authenticated
link by the id of the API key it used.

An agent's name is leased to its account (L{nfltr.relay.leases}, the table
the share names are in): claiming a name is one more holder of its lease,
releasing it one less, and the lease outlives the agent by the lease time.
A link stays listed under its key from its welcome until it is gone,
whatever it does meanwhile (drains, gives its name up), so that a revoked
key reaches every link that used it.

Pure bookkeeping with times passed in, no I/O: the link handlers decide what
to do with what it tells them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .groups import HolderGroup, HolderHealth
from .interfaces import IAgentHolder
from .leases import ILeases, Leases


@dataclass(frozen=True, eq=False)
class AgentEntry:
    """
    One connected agent.

    @ivar name: the name it registered.
    @ivar account: the account its API key belongs to.
    @ivar keyid: the id of its API key.
    @ivar ports: the TCP ports it shares.
    @ivar holder: who holds the agent: its link handler, or an SSH
        connection (L{nfltr.ssh}).
    @ivar plain: the ports among C{ports} shared without end-to-end TLS
        (C{--e2ee false}), which SSH clients may reach.
    @ivar addressed: the ports among C{ports} whose sessions name the
        client's address (C{tcp:PORT@ADDRESS}): the agent writes PROXY
        headers.
    @ivar group: its load-balancing group (C{--group}): agents of one
        account under one name and group are used in turn
        (L{nfltr.relay.groups}); L{None}: the name is its alone.
    @ivar udp: the UDP ports it shares (datagram sessions, L{nfltr.udp}).
    @ivar resumes: its hello said it resumes sessions (L{nfltr.wire.resume}).
    """

    name: str
    account: str
    keyid: str
    ports: frozenset[int]
    holder: IAgentHolder
    plain: frozenset[int] = frozenset()
    addressed: frozenset[int] = frozenset()
    group: str | None = None
    udp: frozenset[int] = frozenset()
    resumes: bool = False


class Directory:
    """
    The agents and authenticated links of one relay.

    @ivar leases: the names' leases (shared with the share registry).
    @ivar _agents: the live agent of each name (a group's first member).
    @ivar _groups: the live agents of each name, in the order they came.
    @ivar health: the holders that withdrew their service.
    @ivar _byKey: the holders of the links authenticated with each key id.
    @ivar _revoked: key ids seen revoked while this relay runs, so that a
        link whose key was verified just before its revocation is still
        turned away.
    """

    def __init__(self, leases: ILeases | None = None) -> None:
        self.leases: ILeases = leases if leases is not None else Leases()
        self._agents: dict[str, AgentEntry] = {}
        self._groups: dict[str, HolderGroup[AgentEntry]] = {}
        self.health = HolderHealth()
        self._byKey: dict[str, set[IAgentHolder]] = {}
        self._revoked: set[str] = set()

    def claimAgent(self, entry: AgentEntry, now: float) -> AgentEntry | None:
        """
        Register C{entry} under its name, one more holder of the name's lease:
        a member of the name's group if it has the same account and group
        (C{entry.group} not L{None}), else in place of the agents there.

        @return: the entry it replaced (an agent of the same account under
            the same name, or its group's first member), now forgotten, or
            C{None}; the group's other members are forgotten too (see
            L{members}).
        @raise NameLeased: another account holds the name's lease (a live
            agent, a share, or a lease alone).
        """
        self.leases.claim(entry.name, entry.account, now)
        group = self._groups.get(entry.name)
        if group is not None:
            for index, member in enumerate(group.members):
                if member.holder is entry.holder:  # its own update
                    group.members[index] = entry
                    if self._agents[entry.name] is member:
                        self._agents[entry.name] = entry
                    self.leases.release(member.name, member.account, now)
                    return member
            if self.joins(entry):
                group.add(entry)
                return None
            for member in group.members:
                self.leases.release(member.name, member.account, now)
        self._groups[entry.name] = HolderGroup(
            entry.group, entry, lambda e: e.holder, self.health)
        old = self._agents.get(entry.name)
        self._agents[entry.name] = entry
        return old

    def releaseAgent(self, entry: AgentEntry, now: float) -> bool:
        """
        Forget C{entry} if it still holds its name: one holder less of the
        name's lease, which runs for the lease time once it has none (see
        L{Leases.release}).  Its link stays listed under its key; the other
        members of its group keep the name.

        @return: whether it did.
        """
        group = self._groups.get(entry.name)
        if group is None or not group.remove(entry):
            return False
        self.leases.release(entry.name, entry.account, now)
        if not group.members:
            del self._groups[entry.name]
            del self._agents[entry.name]
        elif self._agents[entry.name] is entry:
            self._agents[entry.name] = group.members[0]
        return True

    def joins(self, entry: AgentEntry) -> bool:
        """
        Whether L{claimAgent} would make C{entry} one more member of its
        name's group (one more agent).
        """
        group = self._groups.get(entry.name)
        if group is None or entry.group is None or group.group != entry.group:
            return False
        members = group.members
        return members[0].account == entry.account and all(
            m.holder is not entry.holder for m in members)

    def withdrawn(self, name: str) -> bool:
        """
        Whether C{name} has live agents and every one withdrew its service.
        """
        group = self._groups.get(name)
        return group is not None and group.withdrawn()

    def members(self, name: str) -> list[AgentEntry]:
        """
        The live agents called C{name}: its group's members, or the one.
        """
        group = self._groups.get(name)
        return [] if group is None else list(group.members)

    def agents(self) -> list[AgentEntry]:
        """
        The live agents (every member of a group).
        """
        return [member for group in self._groups.values() for member in group.members]

    def agent(self, name: str) -> AgentEntry | None:
        """
        The live agent called C{name}, if any.
        """
        return self._agents.get(name)

    def reachable(self, name: str, account: str, port: int) -> AgentEntry | None:
        """
        The agent a client of C{account} may reach on C{port}: named
        C{name}, owned by C{account}, sharing C{port}; else C{None}, whichever
        condition failed.  Of a group, the member in turn
        (L{HolderGroup.pick}); L{None} when every member withdrew its
        service.
        """
        first = self._agents.get(name)
        if first is None or first.account != account or port not in first.ports:
            return None
        return self._groups[name].pick()

    def addLink(self, keyid: str, holder: IAgentHolder) -> None:
        """
        Record that C{holder}'s link authenticated with C{keyid}.
        """
        self._byKey.setdefault(keyid, set()).add(holder)

    def removeLink(self, keyid: str, holder: IAgentHolder) -> None:
        """
        Forget C{holder}'s link under C{keyid}.
        """
        holders = self._byKey.get(keyid)
        if holders is not None:
            holders.discard(holder)
            if not holders:
                del self._byKey[keyid]

    def linksFor(self, keyid: str) -> list[IAgentHolder]:
        """
        The holders of the links authenticated with C{keyid}.
        """
        return list(self._byKey.get(keyid, ()))

    def markRevoked(self, keyid: str) -> None:
        """
        Remember that C{keyid} was revoked.
        """
        self._revoked.add(keyid)

    def isRevoked(self, keyid: str) -> bool:
        """
        Whether C{keyid} was seen revoked.
        """
        return keyid in self._revoked

    def counts(self) -> tuple[int, int]:
        """
        How many agents, and how many authenticated links in all.
        """
        agents = sum(len(g.members) for g in self._groups.values())
        return agents, sum(len(h) for h in self._byKey.values())
