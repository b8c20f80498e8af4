# -*- test-case-name: tests.relay.test_store_health -*-
"""
Whether the relay can reach its key store now, with one warning per outage.

With a Redis directory (C{--directory}) the store can go away while the
relay runs.  Established links and SSH connections need nothing from it, so
they go on; what needs it (a dialer's API key) is refused at once with
C{STORE_UNAVAILABLE} until it answers again, and C{/readyz} answers 503
meanwhile, so that a load balancer sends new dialers to a relay that can
check their keys.

A call that fails with L{StoreUnavailable} marks the store down
(L{StoreHealth.failed}).  Only the revocation poller's reading of the
revision marks it up again (L{StoreHealth.answered}), because that reading
is also where the poller's view of revocations starts
(L{nfltr.relay.revocation}): a key checked after it is either revoked
already (its record says so) or revoked later (a later poll finds it).  The
poller reads it every C{retry} seconds while the store is down.

What is logged: one warning when an outage starts (with its first reason),
one line when it ends (with its length), nothing per call.
"""

from __future__ import annotations

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.store import ICommandTimes, StoreUnavailable

#: Seconds between two readings of the revision while the store is down.
DEFAULT_STORE_RETRY = 1.0


class StoreHealth:
    """
    The relay's view of its store: up, or down since when.

    @ivar where: the store, for log lines (never with a password).
    @ivar available: whether calls that need the store should be tried.
    @ivar since: when the current outage started (L{None}: none).
    @ivar outages: how many outages started (for the metrics and tests).
    """

    log = Logger()

    def __init__(self, where: str, clock: IReactorTime) -> None:
        self.where = where
        self.available = True
        self.since: float | None = None
        self.outages = 0
        #: How long the directory's calls took, when it counts them (Redis).
        self.commandTimes: ICommandTimes | None = None
        self._clock = clock

    def failed(self, reason: Failure | BaseException) -> bool:
        """
        A call to the store failed with C{reason}: if it says the store is
        unavailable, the store is down from now on (the first time, a
        warning).

        @return: whether C{reason} was the store being unavailable (other
            errors are the caller's to report).
        """
        error = reason.value if isinstance(reason, Failure) else reason
        if not isinstance(error, StoreUnavailable):
            return False
        if self.available:
            self.available = False
            self.since = self._clock.seconds()
            self.outages += 1
            self.log.warn(
                "the key store ({where}) is unavailable: {error}. Established tunnels go on; "
                "new links are refused and /readyz answers 503 until it answers again",
                where=self.where, error=str(error),
            )
        return True

    def answered(self) -> None:
        """
        The store answered the revocation poller: it is up (after an
        outage, one line saying how long it was).
        """
        if self.available:
            return
        self.available = True
        since, self.since = self.since, None
        length = self._clock.seconds() - since if since is not None else 0.0
        self.log.info("the key store ({where}) answers again, after {seconds:.1f} s",
                      where=self.where, seconds=length)
