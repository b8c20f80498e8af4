# -*- test-case-name: tests.agent.test_expiry -*-
"""
C{nfltr http --idle-expiry DURATION}: a share that nobody visited for
DURATION ends (the agent drains and exits 0 with a line saying so), so a
URL handed out for a demo does not stay open for ever.

"Idle" means: no visitor session started for DURATION, and none open when
the time is up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ._settings import ConfigError

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|d)?\s*")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
#: The longest idle expiry (a year).
MAX_IDLE_EXPIRY = 365 * 86400.0


def parse_idle_expiry(text: str) -> float:
    """
    Read C{--idle-expiry}: a number with an optional unit (s, m, h, d).

    @raise ConfigError: not a duration, or out of bounds.
    """
    match = _DURATION.fullmatch(text)
    seconds = float(match.group(1)) * _UNITS[match.group(2)] if match else -1.0
    if not 0 < seconds <= MAX_IDLE_EXPIRY:
        raise ConfigError(
            f"--idle-expiry {text!r}: give a duration such as 90s, 30m, 12h or 7d (at most 365d)"
        )
    return seconds


class IdleExpiry:
    """
    Calls C{expire} once no visitor session started for C{idle} seconds and
    none is open (C{busy} says whether any is; if one is when the time is
    up, another C{idle} seconds are counted).
    """

    def __init__(
        self, clock: Any, idle: float, busy: Callable[[], bool], expire: Callable[[], None]
    ) -> None:
        self.clock = clock
        self.idle = idle
        self.busy = busy
        self.expire = expire
        self._call: Any = None

    def start(self) -> None:
        """
        Start counting idle time.
        """
        self._arm()

    def stop(self) -> None:
        """
        Stop watching.
        """
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def touched(self) -> None:
        """
        A visitor session started: count from now.
        """
        if self._call is not None:
            self._arm()

    def _arm(self) -> None:
        self.stop()
        self._call = self.clock.callLater(self.idle, self._fire)

    def _fire(self) -> None:
        self._call = None
        if self.busy():
            self._arm()
        else:
            self.expire()
