# -*- test-case-name: tests.relay.cluster.test_key_cache -*-
"""
The API keys of forwarded C{tcp-connect} sessions a holding replica checked,
remembered for when the directory (Redis) cannot answer
(L{nfltr.relay.cluster.listener}).

A replica that holds an agent checks the key of every session another
replica forwards to it (the forwarding replica is never trusted with an
account).  While Redis is away that check cannot be made; L{KeyCache} lets
the holding replica take a key it checked within the stale limit
(C{--presence-stale-limit}, the same as for presence records) as checked,
so that visitors already using an established connector keep opening
sessions through other replicas.

Revocations: a key is remembered only when its record says it is not
revoked, and recalled only while the relay has not seen it revoked
(C{isRevoked}: the relay's set of key ids revoked, filled by the
revocation announcements and the poll, L{nfltr.relay.revocation}, which
never forgets one); a key seen revoked is dropped at its recall, whenever
the revocation arrived (before, during or after the check that remembered
it).  A revocation written to Redis that this replica had not yet seen when
Redis went away (announcement lost, poll not yet run) cannot be seen until
Redis answers: its established links go on meanwhile anyway, as on a relay
without this cache.

The plaintext key is never kept: entries are found by its SHA-256 digest.
Sans-I/O, with an injected clock; at most C{entries} keys (the least
recently used go first), each recalled at most C{limit} seconds after the
directory last verified it (0: nothing is kept).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from twisted.internet.interfaces import IReactorTime

from nfltr.store import KeyInfo

from .aged_cache import AgedCache
from .config import DEFAULT_PRESENCE_CACHE_ENTRIES, DEFAULT_PRESENCE_STALE_LIMIT


def _digest(plaintext: str) -> bytes:
    return hashlib.sha256(plaintext.encode("utf-8", "surrogatepass")).digest()


class KeyCache(AgedCache[bytes, KeyInfo]):
    """
    Keys last verified by the directory; see the module (bounds, age and
    counts: L{AgedCache}).
    """

    what = "key cache"

    def __init__(self, clock: IReactorTime, isRevoked: Callable[[str], bool], *,
                 entries: int = DEFAULT_PRESENCE_CACHE_ENTRIES,
                 limit: float = DEFAULT_PRESENCE_STALE_LIMIT) -> None:
        super().__init__(clock, entries=entries, limit=limit)
        self._isRevoked = isRevoked

    def remember(self, plaintext: str, info: KeyInfo | None) -> None:
        """
        The directory just verified C{plaintext} as C{info} (L{None}: no
        such key): a valid key is remembered, anything else forgotten.
        """
        digest = _digest(plaintext)
        if info is None or info.revoked or self._isRevoked(info.keyid):
            self._drop(digest)
        else:
            self._keep(digest, info)

    def recall(self, plaintext: str) -> KeyInfo | None:
        """
        What the directory said of C{plaintext} at most L{limit} seconds ago,
        unless the relay has seen it revoked since (then, or when too old,
        it is dropped).
        """
        return self._recall(_digest(plaintext))

    def _usable(self, value: KeyInfo) -> bool:
        return not self._isRevoked(value.keyid)
