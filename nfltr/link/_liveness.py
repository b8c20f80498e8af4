# -*- test-case-name: tests.link.test_liveness -*-
"""
Liveness: keepalive presets and the tracker that decides when to PING and
when the peer is dead.

A peer is declared dead when nothing at all has been received from it for
C{interval + timeout} seconds: after C{interval} seconds of silence a PING
goes out, and the peer then has C{timeout} seconds to send anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_INTERVAL = 0.5
MAX_INTERVAL = 300.0
MAX_TIMEOUT = 600.0


@dataclass(frozen=True)
class Keepalive:
    """
    How often to probe an idle link and how long to wait for an answer.

    @ivar preset: the preset's name, or C{None} for custom values.
    """

    interval: float
    timeout: float
    preset: str | None = None

    def __post_init__(self) -> None:
        check_keepalive(self.interval, self.timeout)

    def describe(self) -> str:
        """
        A short text for logs and messages.
        """
        name = self.preset or "custom"
        return f"{name} (interval {self.interval:g}s, timeout {self.timeout:g}s)"


def check_keepalive(interval: float, timeout: float) -> None:
    """
    @raise ValueError: the values are outside the protocol's bounds.
    """
    if not MIN_INTERVAL <= interval <= MAX_INTERVAL:
        raise ValueError(
            f"keepalive interval {interval:g}s outside {MIN_INTERVAL:g}..{MAX_INTERVAL:g}s"
        )
    if not interval <= timeout <= MAX_TIMEOUT:
        raise ValueError(
            f"keepalive timeout {timeout:g}s must be between the interval "
            f"({interval:g}s) and {MAX_TIMEOUT:g}s"
        )


PRESETS: dict[str, Keepalive] = {
    "fast": Keepalive(1.5, 3.0, "fast"),
    "default": Keepalive(5.0, 10.0, "default"),
    "nat": Keepalive(10.0, 20.0, "nat"),
    "datacenter": Keepalive(15.0, 30.0, "datacenter"),
    "mobile": Keepalive(15.0, 45.0, "mobile"),
}
DEFAULT_KEEPALIVE = PRESETS["default"]

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m)?\s*")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_duration(text: str) -> float:
    """
    Parse C{"1.5"}, C{"1.5s"}, C{"500ms"} or C{"2m"} into seconds.

    @raise ValueError: not a duration.
    """
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r} (examples: 5s, 500ms, 2m)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_keepalive(text: str) -> Keepalive:
    """
    Parse a preset name or C{interval=D,timeout=D}.

    @raise ValueError: with a message naming the presets and the bounds.
    """
    if text in PRESETS:
        return PRESETS[text]
    fields: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ("interval", "timeout") or key in fields:
            names = ", ".join(PRESETS)
            raise ValueError(
                f"unknown keepalive {text!r}: use one of {names} or interval=D,timeout=D"
            )
        fields[key] = parse_duration(value)
    if set(fields) != {"interval", "timeout"}:
        raise ValueError(f"keepalive {text!r} needs both interval= and timeout=")
    return Keepalive(fields["interval"], fields["timeout"])


class LivenessTracker:
    """
    Decides, from the time of the last received byte, when to PING and when
    the peer is dead.  Time comes from the caller.

    @ivar last_rx: when bytes last arrived.
    @ivar ping_sent_at: when the last PING left, or C{None}.
    @ivar awaiting: a PING left and nothing has arrived since.
    """

    def __init__(self, keepalive: Keepalive, now: float) -> None:
        self.keepalive = keepalive
        self.last_rx = now
        self.ping_sent_at: float | None = None
        self.awaiting = False

    def received(self, now: float) -> None:
        """
        Bytes arrived from the peer: any bytes answer a PING.
        """
        self.last_rx = now
        self.awaiting = False

    def deadline(self) -> float:
        """
        The next time L{poll} has something to do.
        """
        ka = self.keepalive
        if self.awaiting:
            return self.last_rx + ka.interval + ka.timeout
        return self.last_rx + ka.interval

    def poll(self, now: float) -> str | None:
        """
        @return: C{"dead"} if the peer is dead, C{"ping"} if a PING should be
            sent now (the tracker records it as sent), else C{None}.
        """
        # Compare with the very sums deadline() returns: "now - last_rx >=
        # interval" can round the other way, and a tick at the deadline
        # would then do nothing and be rescheduled at the same instant.
        ka = self.keepalive
        if now >= self.last_rx + ka.interval + ka.timeout:
            return "dead"
        if now >= self.last_rx + ka.interval and not self.awaiting:
            self.ping_sent_at = now
            self.awaiting = True
            return "ping"
        return None
