# -*- test-case-name: tests.relay.test_leases -*-
"""
Names are leased to accounts: agent names and share names, in one table.

An account holds a name while one of its agents holds it (as its agent
name, or publishing it as a share: each is one holder), and for
C{leaseTime} seconds after the last one left; meanwhile no other account can
take it.  So a visitor following a link never lands on somebody else's
service because the owner's agent was restarting, and an agent whose link
dropped for a moment gets its name back.  The rule is applied by
L{nfltr.relay.names}.

The table is an L{ILeases}.  L{Leases} is the one in the relay's memory:
pure bookkeeping with times passed in, no I/O; a relay that restarts
forgets it, and the agents that reconnect first get their names.  With a
Redis directory the relay's table is L{nfltr.relay.shared_leases.SharedLeases}:
the same bookkeeping for this relay's holders, and the leases kept in the
directory too, across relays and restarts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from twisted.internet.defer import Deferred, fail, succeed
from zope.interface import Attribute, Interface, implementer

from .config import DEFAULT_LEASE_TIME

#: Expired leases are swept once this many claims were made since the last
#: sweep, so the table stays bounded by the names leased within one lease
#: time.
SWEEP_EVERY = 256


class NameLeased(Exception):
    """
    Another account holds the name (the exception's one argument).
    """


class ILeases(Interface):
    """
    The names leased to accounts, as one relay sees them.

    Checking, claiming and releasing are synchronous, from this relay's own
    table (its holders, and the leases they left running): the claim place
    (L{nfltr.relay.agents.Relay}) checks and claims an agent's names and
    shares all at once, on the reactor thread.  Before that, L{reserve} is
    the one step that may wait: it makes sure no other account holds the
    names anywhere the table reaches (other relays on the same directory,
    this relay before a restart) and keeps them for the account meanwhile.
    """

    leaseTime = Attribute("Seconds a name stays its account's after its last holder left.")

    def holder(name: str, now: float) -> str | None:
        """
        The account that holds C{name} at C{now} on this relay, if any.
        """

    def check(name: str, account: str, now: float) -> None:
        """
        @raise NameLeased: another account holds C{name} on this relay.
        """

    def claim(name: str, account: str, now: float) -> None:
        """
        One more holder of C{name} for C{account}.

        @raise NameLeased: another account holds C{name} on this relay.
        """

    def release(name: str, account: str, now: float) -> bool:
        """
        One holder of C{name} for C{account} left; when it was the last, the
        lease runs for L{leaseTime} more seconds.

        @return: whether it was the last.
        """

    def reserve(names: Sequence[str], account: str, now: float) -> Deferred[None]:
        """
        Make sure no other account holds any of C{names}, here or wherever
        the table is shared, and keep them for C{account} until it claims
        them.  An in-memory table answers at once (a fired L{Deferred}), so
        the claim path stays synchronous on a single relay.

        @return: fails with L{NameLeased} (naming the name) if another
            account holds one of them, with L{nfltr.store.StoreUnavailable}
            if a shared table cannot be reached and this relay's own does
            not show the names to be the account's.
        """

    def forget(name: str, account: str) -> None:
        """
        Drop C{account}'s lease of C{name} here if no holder is left: the
        name was claimed here, then found to be another account's where the
        table is shared (a lease running here would refuse its owner).
        """

    def sweep(now: float) -> None:
        """
        Forget the leases that ended.
        """

    def __len__() -> int:
        """
        How many leases this relay keeps (held or running).
        """


@dataclass
class Lease:
    """
    One account's hold on a name.

    @ivar holders: how many live holders the name has (an agent holding it
        as its name, a published share).
    @ivar expires: when the lease ends if C{holders} is 0.
    """

    account: str
    holders: int = 0
    expires: float = 0.0


@implementer(ILeases)
class Leases:
    """
    The names (agent names and share names) leased by one relay, in its
    memory.
    """

    def __init__(self, leaseTime: float = DEFAULT_LEASE_TIME) -> None:
        self.leaseTime = leaseTime
        self._leases: dict[str, Lease] = {}
        self._claims = 0

    def holder(self, name: str, now: float) -> str | None:
        """
        The account that holds C{name} at C{now}, if any.
        """
        lease = self._leases.get(name)
        if lease is None or (lease.holders == 0 and lease.expires <= now):
            return None
        return lease.account

    def check(self, name: str, account: str, now: float) -> None:
        """
        @raise NameLeased: another account holds C{name}.
        """
        holder = self.holder(name, now)
        if holder is not None and holder != account:
            raise NameLeased(name)

    def claim(self, name: str, account: str, now: float) -> None:
        """
        One more holder of C{name} for C{account}.

        @raise NameLeased: another account holds C{name}.
        """
        self.check(name, account, now)
        lease = self._leases.get(name)
        if lease is None or lease.account != account:
            lease = self._leases[name] = Lease(account)
        lease.holders += 1
        self._claims += 1
        if self._claims >= SWEEP_EVERY:
            self.sweep(now)

    def release(self, name: str, account: str, now: float) -> bool:
        """
        One holder of C{name} for C{account} left; when it was the last,
        the lease runs for C{leaseTime} more seconds.

        @return: whether it was the last.
        """
        lease = self._leases.get(name)
        if lease is None or lease.account != account or lease.holders == 0:
            return False
        lease.holders -= 1
        if lease.holders == 0:
            lease.expires = now + self.leaseTime
            return True
        return False

    def reserve(self, names: Sequence[str], account: str, now: float) -> Deferred[None]:
        """
        See L{ILeases.reserve}: the check of each name, answered at once.
        """
        for name in names:
            try:
                self.check(name, account, now)
            except NameLeased as e:
                return fail(e)
        return succeed(None)

    def forget(self, name: str, account: str) -> None:
        """
        See L{ILeases.forget}.
        """
        lease = self._leases.get(name)
        if lease is not None and lease.account == account and lease.holders == 0:
            del self._leases[name]

    def count(self, name: str) -> int:
        """
        How many live holders C{name} has.
        """
        lease = self._leases.get(name)
        return 0 if lease is None else lease.holders

    def held(self) -> dict[str, str]:
        """
        The names that have holders now, and their accounts.
        """
        return {name: lease.account for name, lease in self._leases.items() if lease.holders}

    def sweep(self, now: float) -> None:
        """
        Forget the leases that ended.
        """
        self._claims = 0
        for name in [n for n, lease in self._leases.items() if self.holder(n, now) is None]:
            del self._leases[name]

    def __len__(self) -> int:
        return len(self._leases)
