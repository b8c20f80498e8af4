# -*- test-case-name: tests.relay.cluster.test_presence_cache -*-
"""
The presence records a replica last read from or wrote to the directory,
remembered for when the directory (Redis) cannot answer.

A presence record is a hint for routing, never an authorization: the replica
it names checks the visitor's key itself, and refuses a visitor of an agent
it no longer holds in the words it uses today.  So while the directory is
away, routing by the last record known is safe, and it keeps visitors of the
agents other replicas hold reaching them; a name never looked up (or looked
up too long ago) still fails, as before.

L{PresenceCache} is sans-I/O, with an injected clock:

  - L{PresenceCache.remember}: the record the directory just gave (a look-up)
    or took (a write of this replica), with the time;
  - L{PresenceCache.forget}: the directory has no such record (a look-up
    found none, this replica released or lost it);
  - L{PresenceCache.recall}: the record remembered, if it is at most
    C{limit} seconds old; only for a look-up the directory cannot answer
    (with the directory up, every look-up reads it: routing follows a move
    at once).

Bounds: at most C{entries} records (the least recently used go first), each
used for at most C{limit} seconds after the directory last said it (0: the
cache is off and remembers nothing).
"""

from __future__ import annotations

from collections import OrderedDict

from twisted.internet.interfaces import IReactorTime

from .config import DEFAULT_PRESENCE_CACHE_ENTRIES, DEFAULT_PRESENCE_STALE_LIMIT


class PresenceCache:
    """
    The last presence record of each (kind, name); see the module.

    @ivar entries: records kept, at most.
    @ivar limit: seconds a record may be recalled after it was remembered
        (0: nothing is kept).
    @ivar recalled: records recalled so far (served while the directory was
        away).
    """

    def __init__(self, clock: IReactorTime, *,
                 entries: int = DEFAULT_PRESENCE_CACHE_ENTRIES,
                 limit: float = DEFAULT_PRESENCE_STALE_LIMIT) -> None:
        if entries < 1 or limit < 0:
            raise ValueError("the presence cache needs at least one entry and an age limit "
                             "of 0 or more")
        self.entries = entries
        self.limit = limit
        self.recalled = 0
        self._clock = clock
        self._records: OrderedDict[tuple[str, str], tuple[float, dict[str, str]]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._records)

    def remember(self, kind: str, name: str, fields: dict[str, str]) -> None:
        """
        The directory says record C{kind}/C{name} is C{fields} now.
        """
        if not self.limit:
            return
        key = (kind, name)
        self._records[key] = (self._clock.seconds(), fields)
        self._records.move_to_end(key)
        while len(self._records) > self.entries:
            self._records.popitem(last=False)

    def forget(self, kind: str, name: str) -> None:
        """
        The directory has no record C{kind}/C{name} (or not this one).
        """
        self._records.pop((kind, name), None)

    def recall(self, kind: str, name: str) -> dict[str, str] | None:
        """
        The record C{kind}/C{name} remembered at most L{limit} seconds ago,
        for a look-up the directory cannot answer (an older one is dropped).
        """
        key = (kind, name)
        found = self._records.get(key)
        if found is None:
            return None
        when, fields = found
        if self._clock.seconds() - when > self.limit:
            del self._records[key]
            return None
        self._records.move_to_end(key)
        self.recalled += 1
        return fields
