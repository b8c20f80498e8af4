# -*- test-case-name: tests.link.test_config -*-
"""
One validated configuration object for a link connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ._frames import MAX_PAYLOAD
from ._liveness import DEFAULT_KEEPALIVE, Keepalive

MIN_WINDOW = 1024
MAX_WINDOW = 1 << 30
MAX_SESSIONS_LIMIT = 1 << 20
# The default connection budget's cap: 128 stuck sessions at the default window.
DEFAULT_BUDGET_CAP = 64 << 20
MAX_HANDSHAKE_TIMEOUT = 300.0
MAX_PING_RATE = 1000.0


@dataclass(frozen=True)
class LinkConfig:
    """
    The limits of one link connection, validated on creation.

    @ivar session_window: how many bytes the peer may send on one session
        before this side has consumed them (the per-session receive window).
    @ivar connection_budget: how many unconsumed bytes the peer may have in
        flight over all sessions together.  The default,
        C{session_window * max_sessions} capped at L{DEFAULT_BUDGET_CAP} (64 MiB; never below
        C{session_window}), means one stuck reader never delays another; a
        smaller budget trades that for less memory.
    @ivar max_sessions: how many sessions the peer may have open at once.
    @ivar send_high_water: bytes queued on one session, beyond its credit,
        above which the session asks its producer to pause; it resumes at
        half that.  Default: C{session_window}.
    @ivar keepalive: the liveness preset a dialer states (a listener adopts
        the dialer's).
    @ivar handshake_timeout: seconds allowed for the preamble and HELLO.
    @ivar ping_rate: PINGs per second a peer may send (burst: 4 times as
        many) before the link is closed with C{ENHANCE_YOUR_CALM}.
    """

    session_window: int = 512 * 1024
    connection_budget: int | None = None
    max_sessions: int = 1024
    send_high_water: int | None = None
    keepalive: Keepalive = field(default=DEFAULT_KEEPALIVE)
    handshake_timeout: float = 10.0
    ping_rate: float = 20.0

    def __post_init__(self) -> None:
        for name in ("session_window", "connection_budget", "max_sessions", "send_high_water"):
            value = getattr(self, name)
            if value is not None and type(value) is not int:
                raise ValueError(f"{name} must be an integer, not {value!r}")
        if not MIN_WINDOW <= self.session_window <= MAX_WINDOW:
            raise ValueError(
                f"session_window {self.session_window} outside {MIN_WINDOW}..{MAX_WINDOW}"
            )
        if not 1 <= self.max_sessions <= MAX_SESSIONS_LIMIT:
            raise ValueError(f"max_sessions {self.max_sessions} outside 1..{MAX_SESSIONS_LIMIT}")
        budget = self.budget
        if not self.session_window <= budget <= MAX_WINDOW:
            raise ValueError(
                f"connection_budget {budget} must be between session_window "
                f"({self.session_window}) and {MAX_WINDOW}"
            )
        if self.send_high_water is not None and self.send_high_water < MAX_PAYLOAD:
            raise ValueError(f"send_high_water {self.send_high_water} below {MAX_PAYLOAD}")
        if not 0 < self.handshake_timeout <= MAX_HANDSHAKE_TIMEOUT:
            raise ValueError(f"handshake_timeout {self.handshake_timeout} outside (0, 300]")
        if not 0 < self.ping_rate <= MAX_PING_RATE:
            raise ValueError(f"ping_rate {self.ping_rate} outside (0, 1000]")

    @cached_property
    def budget(self) -> int:
        """
        The connection budget in force (computed once: read per received
        DATA frame).
        """
        if self.connection_budget is not None:
            return self.connection_budget
        shared = min(self.session_window * self.max_sessions, DEFAULT_BUDGET_CAP)
        return max(self.session_window, shared)

    @cached_property
    def high_water(self) -> int:
        """
        The send high-water mark in force.
        """
        return self.send_high_water if self.send_high_water is not None else self.session_window
