# -*- test-case-name: tests.relay.test_groups -*-
"""
Load-balancing groups: several holders (L{IAgentHolder}) of one account
that publish the same agent name or share name with the same C{group}
(C{nfltr http --group NAME}) are used in turn.

  - L{choose}: the pure choice: of the members that can take a session,
    the one with the fewest sessions open; among those tied, the next in
    turn after the last one chosen.
  - L{HolderHealth}: the holders whose agents withdrew their service (a
    failing health check, L{nfltr.wire.health}): they get no new visitors.
  - L{HolderGroup}: the members of one name, in the order they joined.

A name without a group is a group of one: a withdrawn holder then leaves
its visitors with no member, which the routes answer as an unavailable
agent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from .interfaces import IAgentHolder

T = TypeVar("T")


def choose(members: Sequence[T], sessions: Callable[[T], int], usable: Callable[[T], bool],
           after: int) -> int | None:
    """
    The index of the member to use: of the C{usable} ones, those with the
    fewest C{sessions}; of them, the first at or after index C{after}
    (wrapping round).  L{None} when no member is usable.
    """
    best: list[int] = []
    fewest = 0
    for index, member in enumerate(members):
        if not usable(member):
            continue
        count = sessions(member)
        if not best or count < fewest:
            best, fewest = [index], count
        elif count == fewest:
            best.append(index)
    if not best:
        return None
    later = [index for index in best if index >= after]
    return later[0] if later else best[0]


class HolderHealth:
    """
    The holders whose agents withdrew their service (health checks
    failing); shared by the directory and the share registry of one relay.
    """

    def __init__(self) -> None:
        self._withdrawn: set[IAgentHolder] = set()

    def withdraw(self, holder: IAgentHolder) -> None:
        """
        C{holder} gets no new visitors until L{restore}.
        """
        self._withdrawn.add(holder)

    def restore(self, holder: IAgentHolder) -> None:
        """
        C{holder} takes visitors again (also: forget it, once it is gone).
        """
        self._withdrawn.discard(holder)

    def withdrawn(self, holder: IAgentHolder) -> bool:
        """
        Whether C{holder} withdrew its service.
        """
        return holder in self._withdrawn

    def usable(self, holder: IAgentHolder) -> bool:
        """
        Whether C{holder} may get a new visitor now: not withdrawn, and it
        can open a session.
        """
        return holder not in self._withdrawn and holder.canOpen()


class HolderGroup(Generic[T]):
    """
    The members of one name (holders, or directory entries), in the order
    they joined; L{pick} uses them in turn.

    @ivar group: the group's name; L{None}: a name no other holder may join.
    @ivar members: the members, in the order they joined.
    """

    def __init__(self, group: str | None, first: T, holder: Callable[[T], IAgentHolder],
                 health: HolderHealth) -> None:
        self.group = group
        self.members: list[T] = [first]
        self._holder = holder
        self._health = health
        self._next = 0

    def add(self, member: T) -> None:
        """
        One more member, used in turn with the others.
        """
        self.members.append(member)

    def remove(self, member: T) -> bool:
        """
        Forget C{member}; whether it was one.
        """
        if member not in self.members:
            return False
        index = self.members.index(member)
        del self.members[index]
        if index < self._next:
            self._next -= 1
        return True

    def withdrawn(self) -> bool:
        """
        Whether every member withdrew its service.
        """
        return all(self._health.withdrawn(self._holder(m)) for m in self.members)

    def pick(self) -> T | None:
        """
        The member a new visitor goes to (L{choose}); with no usable member,
        the first not withdrawn (whose session fails in its own words), or
        L{None} when every member withdrew.
        """
        holder, health = self._holder, self._health
        if len(self.members) == 1:  # the common case: no group, nothing to weigh
            only = self.members[0]
            return None if health.withdrawn(holder(only)) else only
        index = choose(self.members, lambda m: holder(m).figures().sessions,
                       lambda m: health.usable(holder(m)), self._next)
        if index is not None:
            self._next = index + 1
            return self.members[index]
        for member in self.members:
            if not health.withdrawn(holder(member)):
                return member
        return None
