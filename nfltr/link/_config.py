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
# Bytes queued in all of a link's session send queues together before every
# session that queues more is paused: 32 sessions at the default high water.
DEFAULT_SEND_QUEUE_LIMIT = 16 << 20
# Bytes of answers to the peer's frames (WINDOW, PONG, RESET, refusals) held
# for a peer that does not read, before the link stops reading it.
DEFAULT_REPLY_LIMIT = 1 << 20
# Seconds a peer may leave unread what it provoked past the reply bound (then
# ENHANCE_YOUR_CALM), or what a closing link left for it (then an abort).
DEFAULT_UNREAD_TIMEOUT = 10.0
# The reply bound in force is never below this many bytes per session window
# of connection budget: the WINDOW frames that DATA within credit provokes
# (see LinkConfig.reply_bound), so honest traffic never stops reading.
WINDOW_REPLY_FACTOR = 128


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
    @ivar send_queue_limit: bytes queued in all session send queues
        together above which every session that queues more is asked to
        pause, as at its own high-water mark; they resume once the total is
        back at half.  So 1,000 sessions cannot each hold their high water.
        L{None}: no limit beyond each session's high water.
    @ivar reply_limit: bytes this side wrote, while the transport was full,
        in answer to the peer's frames (WINDOW, PONG, RESET, refusals), above
        which the link stops reading the peer until the transport drains;
        if it has not drained within C{unread_timeout} the link ends with
        C{ENHANCE_YOUR_CALM}.  Raised if need be to what DATA within credit
        can provoke (see L{reply_bound}).  L{None}: never stop reading.
    @ivar unread_timeout: seconds a peer may leave unread what it provoked
        (see C{reply_limit}), or what a closing link left in the transport
        for it: a close not done by then becomes an abort, so a peer that
        does not read cannot keep a closed link's buffers alive.
    """

    session_window: int = 512 * 1024
    connection_budget: int | None = None
    max_sessions: int = 1024
    send_high_water: int | None = None
    keepalive: Keepalive = field(default=DEFAULT_KEEPALIVE)
    handshake_timeout: float = 10.0
    ping_rate: float = 20.0
    send_queue_limit: int | None = DEFAULT_SEND_QUEUE_LIMIT
    reply_limit: int | None = DEFAULT_REPLY_LIMIT
    unread_timeout: float = DEFAULT_UNREAD_TIMEOUT

    def __post_init__(self) -> None:
        for name in (
            "session_window", "connection_budget", "max_sessions", "send_high_water",
            "send_queue_limit", "reply_limit",
        ):
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
        for name in ("send_queue_limit", "reply_limit"):
            value = getattr(self, name)
            if value is not None and not MAX_PAYLOAD <= value <= MAX_WINDOW:
                raise ValueError(f"{name} {value} outside {MAX_PAYLOAD}..{MAX_WINDOW}")
        if not 0 < self.unread_timeout <= MAX_HANDSHAKE_TIMEOUT:
            raise ValueError(f"unread_timeout {self.unread_timeout} outside (0, 300]")

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

    @cached_property
    def queue_limit(self) -> int:
        """
        The send queue limit in force (L{None} as a bound no queue reaches).
        """
        return self.send_queue_limit if self.send_queue_limit is not None else 1 << 62

    def reply_bound(self, window: int) -> int | None:
        """
        The reply limit in force on a link whose sessions' window in force
        is C{window} (the smaller of the two sides' windows): C{reply_limit},
        raised to C{WINDOW_REPLY_FACTOR * budget // window}.

        A peer can have at most the budget in flight without reading any
        WINDOW of ours, and each WINDOW (14 bytes) returns at least half a
        window, per session and for the connection: 4 WINDOWs per window of
        data, at most twice per spell of a full transport (the WINDOWs
        written during it are read last), 112 bytes per window of budget.
        So DATA within credit never stops this side reading, and two peers
        sending bulk both ways never both stop.
        """
        if self.reply_limit is None:
            return None
        return max(self.reply_limit, WINDOW_REPLY_FACTOR * self.budget // window)
