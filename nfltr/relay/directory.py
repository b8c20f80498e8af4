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
    @ivar resumes: its hello said it resumes sessions (L{nfltr.wire.resume}).
    """

    name: str
    account: str
    keyid: str
    ports: frozenset[int]
    holder: IAgentHolder
    plain: frozenset[int] = frozenset()
    addressed: frozenset[int] = frozenset()
    resumes: bool = False


class Directory:
    """
    The agents and authenticated links of one relay.

    @ivar leases: the names' leases (shared with the share registry).
    @ivar _agents: the live agent of each name.
    @ivar _byKey: the holders of the links authenticated with each key id.
    @ivar _revoked: key ids seen revoked while this relay runs, so that a
        link whose key was verified just before its revocation is still
        turned away.
    """

    def __init__(self, leases: ILeases | None = None) -> None:
        self.leases: ILeases = leases if leases is not None else Leases()
        self._agents: dict[str, AgentEntry] = {}
        self._byKey: dict[str, set[IAgentHolder]] = {}
        self._revoked: set[str] = set()

    def claimAgent(self, entry: AgentEntry, now: float) -> AgentEntry | None:
        """
        Register C{entry} under its name, one more holder of the name's lease.

        @return: the entry it replaced (an agent of the same account under
            the same name), now forgotten, or C{None}.
        @raise NameLeased: another account holds the name's lease (a live
            agent, a share, or a lease alone).
        """
        self.leases.claim(entry.name, entry.account, now)
        old = self._agents.get(entry.name)
        self._agents[entry.name] = entry
        if old is not None:
            self.leases.release(old.name, old.account, now)
        return old

    def releaseAgent(self, entry: AgentEntry, now: float) -> bool:
        """
        Forget C{entry} if it still holds its name: one holder less of the
        name's lease, which runs for the lease time once it has none (see
        L{Leases.release}).  Its link stays listed under its key.

        @return: whether it did.
        """
        if self._agents.get(entry.name) is entry:
            del self._agents[entry.name]
            self.leases.release(entry.name, entry.account, now)
            return True
        return False

    def agents(self) -> list[AgentEntry]:
        """
        The live agents.
        """
        return list(self._agents.values())

    def agent(self, name: str) -> AgentEntry | None:
        """
        The live agent called C{name}, if any.
        """
        return self._agents.get(name)

    def reachable(self, name: str, account: str, port: int) -> AgentEntry | None:
        """
        The agent a client of C{account} may reach on C{port}: named
        C{name}, owned by C{account}, sharing C{port}; else C{None}, whichever
        condition failed.
        """
        entry = self._agents.get(name)
        if entry is None or entry.account != account or port not in entry.ports:
            return None
        return entry

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
        return len(self._agents), sum(len(h) for h in self._byKey.values())
