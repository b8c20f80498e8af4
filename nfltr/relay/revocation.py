# -*- test-case-name: tests.relay.test_revocation -*-
"""
Find keys revoked by any process (C{nfltr keys revoke} writes to the same
database or directory) and close the links that use them; from a store that
logs SSH key removals too (L{ISSHKeyRemovals}: a Redis directory), find the
SSH keys removed, which the relay forgets
(L{nfltr.relay.agents.Relay.sshKeyRemoved}: it remembers SSH keys for when
the store cannot answer).

Two ways, one outcome (L{RevocationPoller.revoked}, which hands each key id
to L{Relay.revoke} once, and L{RevocationPoller.sshKeyRemoved}):

  - the poll (L{RevocationPoller}), the source of truth: every C{interval}
    seconds it reads the store's revision; when it moved, it asks which keys
    were revoked (and SSH keys removed) since the last revision it saw.  A
    poll starts only after the previous one finished; a failed poll is
    logged (a store that is unavailable: once per outage, by L{StoreHealth})
    and, while the store is down, tried again every C{retry} seconds
    instead.  Its readings of the
    revision are what says the store is up again.  A relay that started
    while its store was down has no revision to start from: its first
    reading is the start.
  - announcements (L{RevocationListener}), from a store that publishes each
    revocation (L{IRevocationFeed}: a Redis directory), and each SSH key
    removal: the key's links end (or the SSH key is forgotten) at once
    instead of at the next poll.  One missed while the subscription
    reconnects (or before it could start) is the poll's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.store import (
    IRevocationFeed,
    IRevocationSubscription,
    ISSHKeyRemovals,
    IStore,
    StoreError,
)

from .link_handler import Relay
from .store_health import DEFAULT_STORE_RETRY, StoreHealth

#: Seconds between two attempts to subscribe to revocations, while they fail.
DEFAULT_LISTEN_RETRY = 5.0


class RevocationPoller:
    """
    Polls a store for revocations on behalf of a L{Relay}.

    @ivar revision: the last store revision acted on (L{None}: none read
        yet; the first reading is the start).
    @ivar health: whether the store is up; the poll's readings of the
        revision say it is.
    @ivar retry: seconds between two polls while the store is down (at most
        C{interval}).
    """

    log = Logger()

    def __init__(
        self, store: IStore, relay: Relay, clock: IReactorTime,
        interval: float, revision: int | None, health: StoreHealth | None = None,
        retry: float = DEFAULT_STORE_RETRY,
    ) -> None:
        self.store = store
        self.relay = relay
        self.interval = interval
        self.revision = revision
        self.health = health if health is not None else StoreHealth("the key store", clock)
        self.retry = min(retry, interval)
        self._clock = clock
        self._call: IDelayedCall | None = None
        self._running = False

    def start(self) -> None:
        """
        Poll every C{interval} seconds (C{retry} while the store is down),
        the first time one such delay from now.
        """
        self._running = True
        self._schedule()

    def _schedule(self) -> None:
        if self._running:
            delay = self.interval if self.health.available else self.retry
            self._call = self._clock.callLater(delay, self._tick)

    def _tick(self) -> None:
        self._call = None
        self.poll().addBoth(lambda _: self._schedule())

    def stop(self) -> None:
        """
        Stop polling.
        """
        self._running = False
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def poll(self) -> Deferred[Any]:
        """
        Check once.  Never fails: errors are logged.
        """
        d = self.store.revision()
        d.addCallback(self._revisionRead)
        d.addErrback(self._failed)
        return d

    def _revisionRead(self, revision: int) -> Deferred[Any] | None:
        since = self.revision
        if since is None:
            self.revision = revision  # the first reading: revocations from here on
        self.health.answered()
        if since is None or revision == since:
            return None
        return Deferred.fromCoroutine(self._changed(since, revision))

    async def _changed(self, since: int, revision: int) -> None:
        for keyid in await self.store.revoked_since(since):
            self.revoked(keyid)
        removals = ISSHKeyRemovals(self.store, None)
        if removals is not None:
            for fingerprint in await removals.ssh_keys_removed_since(since):
                self.sshKeyRemoved(fingerprint)
        self.revision = max(self.revision or 0, revision)

    def revoked(self, keyid: str) -> None:
        """
        C{keyid} was revoked: its links end (L{Relay.revoke}), unless the
        relay has seen it already (an announcement, then the poll).
        """
        if not self.relay.directory.isRevoked(keyid):
            self.relay.revoke(keyid)

    def sshKeyRemoved(self, fingerprint: str) -> None:
        """
        The SSH key C{fingerprint} was removed: the relay forgets it
        (L{nfltr.relay.agents.Relay.sshKeyRemoved}; an announcement, then the
        poll: twice).
        """
        self.relay.sshKeyRemoved(fingerprint)

    def _failed(self, failure: Failure) -> None:
        if not self.health.failed(failure):
            self.log.failure("cannot check for revoked API keys; will retry", failure)


class RevocationListener:
    """
    Listens to the revocations a store announces (L{IRevocationFeed}) and
    hands each key id to C{revoked} (L{RevocationPoller.revoked}), and each
    SSH key removal to C{removed} (L{RevocationPoller.sshKeyRemoved}), if
    given.

    A subscription that cannot start (the store is away, or refuses) is
    tried again every C{retry} seconds, with one warning for the streak;
    once it listens, it subscribes again by itself after a lost connection.

    @ivar subscription: the live subscription, once it listens.
    @ivar retry: seconds between two attempts to subscribe.
    """

    log = Logger()

    def __init__(
        self, feed: IRevocationFeed, revoked: Callable[[str], object], clock: IReactorTime,
        removed: Callable[[str], object] | None = None, retry: float = DEFAULT_LISTEN_RETRY,
    ) -> None:
        self.feed = feed
        self.revoked = revoked
        self.removed = removed
        self.retry = retry
        self.subscription: IRevocationSubscription | None = None
        self._clock = clock
        self._call: IDelayedCall | None = None
        self._failing = False
        self._stopped = False

    def start(self) -> Deferred[None]:
        """
        Subscribe; fires once it listens, or once it failed (then it tries
        again in C{retry} seconds).  Never fails.
        """
        self._call = None
        return Deferred.fromCoroutine(self._subscribe())

    async def _subscribe(self) -> None:
        if self._stopped or self.subscription is not None:
            return
        try:
            subscription = await self.feed.subscribe_revocations(self.revoked, self.removed)
        except StoreError as e:
            if not self._failing:
                self._failing = True
                self.log.warn(
                    "cannot listen for revocations: {error}; the poll finds them meanwhile, "
                    "and listening is tried again every {retry:g} s",
                    error=str(e), retry=self.retry,
                )
            if not self._stopped:
                self._call = self._clock.callLater(self.retry, self.start)
            return
        self._failing = False
        if self._stopped:
            await subscription.stop()
            return
        self.subscription = subscription

    def stop(self) -> Deferred[None]:
        """
        Stop listening (and trying to).
        """
        self._stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        subscription, self.subscription = self.subscription, None
        if subscription is None:
            return Deferred.fromCoroutine(_nothing())
        return subscription.stop()


async def _nothing() -> None:
    return None
