# -*- test-case-name: tests.relay.cluster.test_aged_cache -*-
"""
What the directory (Redis) last said, kept for when it cannot answer: the
bounded, aged memory the replica's caches share (presence records,
L{nfltr.relay.cluster.presence_cache}; API keys of forwarded sessions,
L{nfltr.relay.cluster.key_cache}; SSH public keys,
L{nfltr.relay.cluster.ssh_key_cache}).

L{AgedCache} is sans-I/O, with an injected clock.  Bounds: at most
C{entries} values (the least recently used go first), each recalled at most
C{limit} seconds after the directory last said it (0: the cache is off and
keeps nothing).  What a value means, and when one must not be recalled
although it is young enough, is each user's (L{AgedCache._usable}).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from twisted.internet.interfaces import IReactorTime

from .config import DEFAULT_PRESENCE_CACHE_ENTRIES, DEFAULT_PRESENCE_STALE_LIMIT

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class AgedCache(Generic[K, V]):
    """
    Values by key, each with the time the directory said it; see the
    module.

    @cvar what: the cache's name, for the error of a bad bound.
    @ivar entries: values kept, at most.
    @ivar limit: seconds a value may be recalled after it was kept (0:
        nothing is kept).
    @ivar recalled: values recalled so far (served while the directory was
        away).
    @ivar loggedOutage: the store outage (its number) during which recalling
        was last logged (L{firstInOutage}).
    """

    what = "cache"

    def __init__(self, clock: IReactorTime, *,
                 entries: int = DEFAULT_PRESENCE_CACHE_ENTRIES,
                 limit: float = DEFAULT_PRESENCE_STALE_LIMIT) -> None:
        if entries < 1 or limit < 0:
            raise ValueError(f"the {self.what} needs at least one entry and an age limit of 0 "
                             "or more")
        self.entries = entries
        self.limit = limit
        self.recalled = 0
        self.loggedOutage: int | None = None
        self._clock = clock
        self._values: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._values)

    def _keep(self, key: K, value: V) -> None:
        """
        The directory says C{value} for C{key} now (nothing is kept with a
        limit of 0).
        """
        if not self.limit:
            return
        self._values[key] = (self._clock.seconds(), value)
        self._values.move_to_end(key)
        while len(self._values) > self.entries:
            self._values.popitem(last=False)

    def _drop(self, key: K) -> None:
        """
        Forget C{key}'s value, if any.
        """
        self._values.pop(key, None)

    def _recall(self, key: K) -> V | None:
        """
        The value kept for C{key} at most L{limit} seconds ago and still
        L{_usable} (else it is dropped), counted in L{recalled}.
        """
        found = self._values.get(key)
        if found is None:
            return None
        when, value = found
        if self._clock.seconds() - when > self.limit or not self._usable(value):
            del self._values[key]
            return None
        self._values.move_to_end(key)
        self.recalled += 1
        return value

    def _usable(self, value: V) -> bool:
        """
        Whether C{value}, young enough, may be recalled (by default: yes).
        """
        return True

    def firstInOutage(self, outage: int) -> bool:
        """
        Whether this is the first time in store outage number C{outage}
        (L{nfltr.relay.store_health.StoreHealth.outages}) that the cache is
        asked: the one time per outage its use is logged.
        """
        if self.loggedOutage == outage:
            return False
        self.loggedOutage = outage
        return True
