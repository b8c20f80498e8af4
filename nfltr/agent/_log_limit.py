# -*- test-case-name: tests.agent.test_local -*-
"""
L{Quiet}: one log line per cause per interval, so a burst of failures of
the same kind (a browser opening six connections to a service that is down)
is one line, not six.
"""

from __future__ import annotations

from twisted.internet.interfaces import IReactorTime

# Seconds during which a repeated message is counted instead of logged.
REPEAT_INTERVAL = 10.0


class Quiet:
    """
    Decides which occurrences of a message are logged.
    """

    def __init__(self, clock: IReactorTime, interval: float = REPEAT_INTERVAL) -> None:
        self.clock = clock
        self.interval = interval
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def admit(self, message: str) -> str | None:
        """
        The text to log for this occurrence of C{message}, or L{None} to
        stay quiet.  After a quiet spell the text says how many occurrences
        were not logged.
        """
        now = self.clock.seconds()
        last = self._last.get(message)
        if last is not None and now - last < self.interval:
            self._suppressed[message] = self._suppressed.get(message, 0) + 1
            return None
        self._last[message] = now
        suppressed = self._suppressed.pop(message, 0)
        if len(self._last) > 100:  # noqa: PLR2004 - forget old messages; keep memory bounded
            self._forgetBefore(now - self.interval)
        if suppressed:
            return f"{message} (and {suppressed} more times)"
        return message

    def __len__(self) -> int:
        """
        How many messages are remembered.
        """
        return len(self._last)

    def _forgetBefore(self, when: float) -> None:
        for message, at in list(self._last.items()):
            if at < when:
                del self._last[message]
                self._suppressed.pop(message, None)
