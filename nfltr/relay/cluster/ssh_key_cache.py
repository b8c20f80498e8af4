# -*- test-case-name: tests.relay.cluster.test_ssh_key_cache -*-
"""
The SSH public keys a replica checked itself, remembered for when the
directory (Redis) cannot answer: the logins on its SSH port (C{ssh -W},
C{-L}, C{-R}) and the SSH clients' channels another replica forwards to it
(L{nfltr.relay.cluster.listener}) both ask
L{nfltr.relay.agents.Relay.sshKeyAccount}, which asks the directory through
L{SSHKeyCache.lookup}.

With the directory up, every look-up reads it, and its answer is kept: the
key's fingerprint and its account (a key it does not know is forgotten).
Only a look-up the directory cannot answer (L{StoreUnavailable}) is answered
from memory, with an account the directory gave at most C{limit} seconds
ago (C{--presence-stale-limit}); one line at info per outage says so,
nothing per login.  A key never checked here, or too long ago, fails as
before.

Removals: a key removed (C{nfltr keys remove-ssh}) is announced on the
directory's channel and logged under its revision, where the revocation
poll finds it (L{nfltr.relay.revocation}); either way the relay calls
L{SSHKeyCache.removed}, which forgets the key.  A look-up that was under way
when a removal was seen is not kept (L{SSHKeyCache.remember}'s C{ticket}:
the directory may have answered before the removal), so a key seen removed
is never recalled, unless a look-up that started after the removal was seen
found it registered again (C{keys add-ssh}).  A removal written to Redis
that this replica had not yet seen when Redis went away (announcement lost,
poll not yet run) cannot be seen until Redis answers, as for revocations
(L{nfltr.relay.cluster.key_cache}).

Public keys are not secrets; still, only fingerprints and account names are
kept.  Sans-I/O but for the L{Deferred} of L{SSHKeyCache.lookup}, with an
injected clock; bounds and age: L{nfltr.relay.cluster.aged_cache}.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.store import InvalidSSHKey, StoreUnavailable, parse_ssh_public_key

from ..store_health import StoreHealth
from .aged_cache import AgedCache
from .config import DEFAULT_PRESENCE_CACHE_ENTRIES, DEFAULT_PRESENCE_STALE_LIMIT


class SSHKeyCache(AgedCache[str, str]):
    """
    The account of each SSH key (by fingerprint) the directory last
    confirmed; see the module (bounds, age and counts: L{AgedCache}).

    @ivar removals: removals seen so far (the look-ups' tickets).
    """

    what = "SSH key cache"
    log = Logger()

    def __init__(self, clock: IReactorTime, health: StoreHealth, *,
                 entries: int = DEFAULT_PRESENCE_CACHE_ENTRIES,
                 limit: float = DEFAULT_PRESENCE_STALE_LIMIT) -> None:
        """
        @param health: the relay's view of its store (the outage a recall
            falls in, for its one line).
        """
        super().__init__(clock, entries=entries, limit=limit)
        self.removals = 0
        self._health = health

    def remember(self, fingerprint: str, account: str | None, ticket: int) -> None:
        """
        The directory says the key C{fingerprint} is C{account}'s (L{None}:
        no account's), in answer to a look-up that started when
        L{removals} was C{ticket}: kept, unless it is no account's or a
        removal was seen meanwhile (then forgotten).
        """
        if account is None or ticket != self.removals:
            self._drop(fingerprint)
        else:
            self._keep(fingerprint, account)

    def recall(self, fingerprint: str) -> str | None:
        """
        The account the directory gave for C{fingerprint} at most L{limit}
        seconds ago, if it was not removed since.
        """
        return self._recall(fingerprint)

    def removed(self, fingerprint: str) -> None:
        """
        The key C{fingerprint} was removed from the directory: forgotten,
        and look-ups under way are not kept.
        """
        self.removals += 1
        if fingerprint in self._values:
            self._drop(fingerprint)
            self.log.info("forgot SSH key {fingerprint}: it was removed from the directory",
                          fingerprint=fingerprint)

    def lookup(self, line: str, ask: Callable[[], Deferred[str | None]]
               ) -> Deferred[str | None]:
        """
        The account of the key C{line} (C{TYPE BASE64}): C{ask()}'s answer,
        kept; if C{ask()} fails with L{StoreUnavailable}, the account
        recalled, else that failure.
        """
        try:
            fingerprint = parse_ssh_public_key(line).fingerprint
        except InvalidSSHKey:
            return ask()  # never kept: the directory says what it says of it
        ticket = self.removals

        def answered(account: str | None) -> str | None:
            self.remember(fingerprint, account, ticket)
            return account

        def failed(failure: Failure) -> str | Failure:
            account = self.recall(fingerprint) if failure.check(StoreUnavailable) else None
            if account is None:
                return failure
            if self.firstInOutage(self._health.outages):
                self.log.info(
                    "the directory cannot check SSH keys: logins and forwarded channels with a "
                    "key this replica checked within {limit:g} s (--presence-stale-limit) and "
                    "has not seen removed are let through; other keys are refused until it "
                    "answers", limit=self.limit)
            return account

        return ask().addCallbacks(answered, failed)
