# -*- test-case-name: tests.link.test_memory -*-
"""
L{LinkMemory}: one account of the bytes all of a process's links hold for
their peers, and a cap on it.

A relay gives one to every link it accepts (through
L{nfltr.link.twisted.LinkFactory}); agents and connectors use none.  Each
link reports what it holds: the bytes in its session send queues, and the
bytes it wrote to its transport since the transport last said it was full
(the write that filled it included), which sit in that transport's buffer
until the peer reads them.  Links report after each write, not per frame.

Over the cap (C{limit}) the links holding more than an equal share of it
(the cap divided by the links that hold anything) are B{pressed}: their
sessions that queue more are paused, and they refuse new sessions (the peer's
C{OPEN} is reset with C{OVERLOADED}; opening one locally raises
L{nfltr.link.twisted.LinkOverloaded}).  Links holding less go on as before, so one link that
does not read cannot stall the others.  A pressed link is released once the
total is back under L{LOW_WATER} of the cap or it holds under half its share;
then every link pressed meanwhile re-checks (in its next flush, not from
inside another link's call).

No I/O: time, for the log throttle only, comes from a callable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.logger import Logger

from nfltr.wire import LogThrottle

#: The cap a relay runs with unless told otherwise (C{--link-memory}).
DEFAULT_LINK_MEMORY = 256 << 20
#: The smallest cap: below it a few links at their default window would be
#: pressed all the time.
MIN_LINK_MEMORY = 1 << 20
#: Pressure lifts once the total is back under this fraction of the cap.
LOW_WATER = 0.75

_log = Logger()


class LinkMemory:
    """
    The bytes a process's links hold for their peers, and its cap.

    @ivar limit: the cap, bytes; L{None}: counted, never pressed.
    @ivar held: bytes held now, over all links.
    @ivar holders: links holding anything now.
    @ivar peak: the most C{held} has been.
    @ivar refused: sessions refused under pressure.
    @ivar _pressed: the links pressed now, oldest first.
    """

    def __init__(
        self, limit: int | None = DEFAULT_LINK_MEMORY,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if limit is not None and (type(limit) is not int or limit < MIN_LINK_MEMORY):
            raise ValueError(f"link memory limit {limit!r} below {MIN_LINK_MEMORY} bytes")
        self.limit = limit
        self.held = 0
        self.holders = 0
        self.peak = 0
        self.refused = 0
        self._pressed: dict[Any, None] = {}
        self._low = 0 if limit is None else int(limit * LOW_WATER)
        self._throttle = LogThrottle(clock) if clock is not None else None

    @property
    def pressed(self) -> int:
        """
        How many links are pressed now.
        """
        return len(self._pressed)

    def change(self, link: Any, before: int, after: int) -> bool:
        """
        C{link} held C{before} bytes and holds C{after} now.

        @return: whether C{link} is pressed (see the module).
        """
        held = self.held = self.held + after - before
        self.peak = max(self.peak, held)
        if not before and after:
            self.holders += 1
        elif before and not after:
            self.holders -= 1
        limit = self.limit
        if limit is None:
            return False
        share = limit // max(1, self.holders)
        pressed = self._pressed
        if link in pressed:
            if held > self._low and after > share // 2:
                return True
            del pressed[link]
        elif held > limit and after > share:
            pressed[link] = None
            if len(pressed) == 1:
                self._over(held)
            return True
        if pressed and held <= self._low:
            relieved, self._pressed = pressed, {}
            for other in relieved:
                other.memoryRelieved()
        return False

    def forget(self, link: Any, before: int) -> None:
        """
        C{link} is gone; it held C{before} bytes.
        """
        self._pressed.pop(link, None)
        self.change(link, before, 0)

    def _over(self, held: int) -> None:
        throttle = self._throttle
        left = 0 if throttle is None else throttle.allow("links", "over")
        if left is None:
            return
        _log.warn(
            "links hold {held} bytes for their peers, over the limit of {limit} "
            "(--link-memory): the sessions of the links holding most are paused, and "
            "those links take no new session{left}",
            held=held, limit=self.limit,
            left=f" ({left} similar lines left out)" if left else "",
        )
