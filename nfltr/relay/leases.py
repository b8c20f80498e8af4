# -*- test-case-name: tests.relay.test_leases -*-
"""
Names are leased to accounts: agent names and share names, in one table.

An account holds a name while one of its agents holds it (as its agent
name, or publishing it as a share: each is one holder), and for
C{leaseTime} seconds after the last one left; meanwhile no other account can
take it.  So a visitor following a link never lands on somebody else's
service because the owner's agent was restarting, and an agent whose link
dropped for a moment gets its name back.  The rule is applied by
L{nfltr.relay.names}.  Pure bookkeeping with times passed in, no I/O.
Leases live in the relay's memory: a relay that restarts forgets them, and
the agents that reconnect first get their names.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import DEFAULT_LEASE_TIME

#: Expired leases are swept once this many claims were made since the last
#: sweep, so the table stays bounded by the names leased within one lease
#: time.
SWEEP_EVERY = 256


class NameLeased(Exception):
    """
    Another account holds the name.
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


class Leases:
    """
    The names (agent names and share names) leased by one relay.
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

    def release(self, name: str, account: str, now: float) -> None:
        """
        One holder of C{name} for C{account} left; when it was the last,
        the lease runs for C{leaseTime} more seconds.
        """
        lease = self._leases.get(name)
        if lease is None or lease.account != account or lease.holders == 0:
            return
        lease.holders -= 1
        if lease.holders == 0:
            lease.expires = now + self.leaseTime

    def sweep(self, now: float) -> None:
        """
        Forget the leases that ended.
        """
        self._claims = 0
        for name in [n for n, lease in self._leases.items() if self.holder(n, now) is None]:
            del self._leases[name]

    def __len__(self) -> int:
        return len(self._leases)
