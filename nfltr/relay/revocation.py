# -*- test-case-name: tests.relay.test_revocation -*-
"""
Find keys revoked by any process (C{nfltr keys revoke} writes to the same
database) and close the links that use them.

Every C{interval} seconds the poller reads the store's revision; when it
moved, it asks which keys were revoked since the last revision it saw and
hands each to L{Relay.revoke}.  A poll starts only after the previous one
finished, and a failed poll is logged and retried at the next tick.
"""

from __future__ import annotations

from typing import Any, Protocol

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from .link_handler import Relay


class RevisionSource(Protocol):
    """
    The part of a store the poller uses.
    """

    def revision(self) -> Deferred[int]:
        """
        See L{nfltr.store.SQLiteStore.revision}.
        """

    def revoked_since(self, revision: int) -> Deferred[list[str]]:
        """
        See L{nfltr.store.SQLiteStore.revoked_since}.
        """


class RevocationPoller:
    """
    Polls a store for revocations on behalf of a L{Relay}.

    @ivar revision: the last store revision acted on.
    """

    log = Logger()

    def __init__(
        self, store: RevisionSource, relay: Relay, clock: IReactorTime,
        interval: float, revision: int,
    ) -> None:
        self.store = store
        self.relay = relay
        self.interval = interval
        self.revision = revision
        self._loop = LoopingCall(self.poll)
        self._loop.clock = clock

    def start(self) -> None:
        """
        Poll every C{interval} seconds, the first time one interval from now.
        """
        self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        """
        Stop polling.
        """
        if self._loop.running:
            self._loop.stop()

    def poll(self) -> Deferred[Any]:
        """
        Check once.  Never fails: errors are logged.
        """
        d = self.store.revision()
        d.addCallback(self._revisionRead)
        d.addErrback(self._failed)
        return d

    def _revisionRead(self, revision: int) -> Deferred[Any] | None:
        if revision == self.revision:
            return None
        since = self.revision
        d = self.store.revoked_since(since)
        d.addCallback(self._revoked, revision)
        return d

    def _revoked(self, keyids: list[str], revision: int) -> None:
        for keyid in keyids:
            self.relay.revoke(keyid)
        self.revision = max(self.revision, revision)

    def _failed(self, failure: Failure) -> None:
        self.log.failure("cannot check for revoked API keys; will retry", failure)
