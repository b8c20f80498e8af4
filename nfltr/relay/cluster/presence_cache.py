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
cache is off and remembers nothing): L{nfltr.relay.cluster.aged_cache}.
"""

from __future__ import annotations

from .aged_cache import AgedCache


class PresenceCache(AgedCache[tuple[str, str], dict[str, str]]):
    """
    The last presence record of each (kind, name); see the module (bounds,
    age and counts: L{AgedCache}).
    """

    what = "presence cache"

    def remember(self, kind: str, name: str, fields: dict[str, str]) -> None:
        """
        The directory says record C{kind}/C{name} is C{fields} now.
        """
        self._keep((kind, name), fields)

    def forget(self, kind: str, name: str) -> None:
        """
        The directory has no record C{kind}/C{name} (or not this one).
        """
        self._drop((kind, name))

    def recall(self, kind: str, name: str) -> dict[str, str] | None:
        """
        The record C{kind}/C{name} remembered at most L{limit} seconds ago,
        for a look-up the directory cannot answer (an older one is dropped).
        """
        return self._recall((kind, name))
