# -*- test-case-name: tests.relay.test_shared_leases -*-
"""
The relay's lease table on a Redis directory: L{SharedLeases}, an
L{ILeases}.

This relay's holders are counted in its memory, by a L{Leases} (the cache):
checking, claiming and releasing are answered from it on the reactor thread,
as on a relay of its own.  The directory's table (L{INameLeaseTable}) is
where leases outlive this relay and meet other relays':

  - L{SharedLeases.reserve}, before a claim, holds the names in the
    directory for the account, atomically: if another account holds one,
    nothing changes and the claim is refused in the same words as a local
    conflict (L{NameLeased});
  - when the last holder of a name on this relay leaves, the relay takes its
    mark off the name and the directory's lease runs for the lease time;
  - every L{SharedLeases.renewal} seconds the relay renews the names it has
    holders of (their keys live L{SharedLeases.heldTTL} without renewal: a
    relay that dies leaves its names leased that long), takes its mark off
    the names reserved but never claimed, and retries the releases that
    failed.

While the directory does not answer, established holders are untouched
(nothing they do needs it).  A reservation then fails with
L{StoreUnavailable}, unless this relay's own table shows every name as the
account's already.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.store import INameLeaseTable, LeaseTaken, StoreError, StoreUnavailable

from .config import DEFAULT_LEASE_TIME
from .leases import ILeases, Leases, NameLeased
from .store_health import StoreHealth

#: The least time a held name's key lives in the directory without renewal
#: (with a short --lease-time).
MIN_HELD_TTL = 60.0
#: The longest time between two renewals of the names this relay holds.
MAX_RENEWAL = 300.0


@implementer(ILeases)
class SharedLeases:
    """
    This relay's leases, kept in a shared table too; see the module.

    @ivar table: the directory's table.
    @ivar local: this relay's own table (the cache).
    @ivar relay: this relay's mark in the directory (random, per process).
    @ivar heldTTL: seconds a held name's key lives without renewal.
    @ivar renewal: seconds between two renewals.
    """

    log = Logger()

    def __init__(
        self, table: INameLeaseTable, clock: IReactorTime,
        leaseTime: float = DEFAULT_LEASE_TIME, relay: str | None = None,
        health: StoreHealth | None = None,
    ) -> None:
        self.table = table
        self.local = Leases(leaseTime)
        self.relay = relay if relay is not None else secrets.token_hex(8)
        self.heldTTL = max(leaseTime, MIN_HELD_TTL)
        self.renewal = min(self.heldTTL / 3, MAX_RENEWAL)
        self.health = health
        self._clock = clock
        # The names this relay marked in the directory, and their accounts.
        self._marked: dict[str, str] = {}
        self._lost: set[str] = set()
        self._call: IDelayedCall | None = None
        self._running = False

    @property
    def leaseTime(self) -> float:
        """
        See L{ILeases.leaseTime}.
        """
        return self.local.leaseTime

    def holder(self, name: str, now: float) -> str | None:
        """
        See L{ILeases.holder}: this relay's view.
        """
        return self.local.holder(name, now)

    def check(self, name: str, account: str, now: float) -> None:
        """
        See L{ILeases.check}: this relay's view.
        """
        self.local.check(name, account, now)

    def claim(self, name: str, account: str, now: float) -> None:
        """
        See L{ILeases.claim}: this relay's view (L{reserve} came first).
        """
        self.local.claim(name, account, now)

    def release(self, name: str, account: str, now: float) -> bool:
        """
        See L{ILeases.release}; after the last holder here, the relay's mark
        comes off the name in the directory (in the background).
        """
        last = self.local.release(name, account, now)
        if last:
            self._unmark(name, account).addErrback(self._failed)
        return last

    def forget(self, name: str, account: str) -> None:
        """
        See L{ILeases.forget}.
        """
        self.local.forget(name, account)

    def sweep(self, now: float) -> None:
        """
        See L{ILeases.sweep}.
        """
        self.local.sweep(now)

    def __len__(self) -> int:
        return len(self.local)

    def reserve(self, names: Sequence[str], account: str, now: float) -> Deferred[None]:
        """
        See L{ILeases.reserve}: this relay's table first, then the
        directory's.
        """
        names = list(dict.fromkeys(names))
        for name in names:
            try:
                self.local.check(name, account, now)
            except NameLeased as e:
                return fail(e)
        d = self.table.reserve(names, account, self.relay, self.heldTTL)

        def reserved(_: object) -> None:
            for name in names:
                self._marked[name] = account

        def refused(failure: Failure) -> Failure | None:
            taken = failure.value
            if isinstance(taken, LeaseTaken):
                return Failure(NameLeased(taken.name))
            self._failed(failure)
            seconds = self._clock.seconds()
            if failure.check(StoreUnavailable) and all(
                self.local.holder(name, seconds) == account for name in names
            ):
                return None  # ours here: the cache answers while the directory is away
            return failure

        return d.addCallbacks(reserved, refused)

    def _unmark(self, name: str, account: str) -> Deferred[None]:
        d = self.table.release(name, account, self.relay, self.leaseTime)

        def done(_: object) -> None:
            if self.local.count(name) == 0:
                self._marked.pop(name, None)

        return d.addCallback(done)

    def _failed(self, failure: Failure) -> None:
        """
        A call to the directory failed: an outage is the health's to log
        (once); anything else is logged here.
        """
        if self.health is not None and self.health.failed(failure):
            return
        if failure.check(StoreError):
            self.log.warn("name leases in the directory: {error}", error=failure.getErrorMessage())
        else:
            self.log.failure("name leases in the directory", failure)

    # -- renewal ------------------------------------------------------------------

    def start(self) -> None:
        """
        Renew every L{renewal} seconds, the first time one from now.
        """
        self._running = True
        self._schedule()

    def stop(self) -> None:
        """
        Stop renewing (the marks left run out by themselves).
        """
        self._running = False
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def _schedule(self) -> None:
        if self._running:
            self._call = self._clock.callLater(self.renewal, self._tick)

    def _tick(self) -> None:
        self._call = None
        self.renew().addBoth(lambda _: self._schedule())

    def renew(self) -> Deferred[None]:
        """
        Once: take this relay's mark off the names it has no holder of, and
        renew the names it has.  Never fails; stops at the first failure
        (the next renewal starts over).
        """
        return Deferred.fromCoroutine(self._renew()).addErrback(self._failed)

    async def _renew(self) -> None:
        held = self.local.held()
        for name, account in list(self._marked.items()):
            if name not in held:
                await self._unmark(name, account)
        for name, account in held.items():
            try:
                await self.table.reserve([name], account, self.relay, self.heldTTL)
            except LeaseTaken:
                self._lostName(name, account)
                continue
            self._marked[name] = account
            self._lost.discard(name)

    def _lostName(self, name: str, account: str) -> None:
        """
        A name this relay's holders have is another account's in the
        directory (its mark ran out while the directory was away, and
        another relay gave it away): the holders here keep it until they
        leave; said once.
        """
        if name not in self._lost:
            self._lost.add(name)
            self.log.warn(
                "name {name} is held here by account {account} but leased to another account "
                "in the directory (this relay's lease ran out while the directory was away)",
                name=name, account=account,
            )
