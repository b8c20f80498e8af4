# -*- test-case-name: tests.udp.test_table -*-
"""
L{SessionTable}: the datagram sessions of one UDP entrance (a connector's
C{--listen} socket, a relay's public UDP port), one per visitor address,
each ended after L{DatagramLimits.idle_timeout} seconds without a datagram
either way.  Time comes from an injected clock; the sessions from an
L{IDatagramOpener}: no socket here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet.interfaces import IReactorTime

from .interfaces import Address, IDatagramOpener, IDatagramPeer

#: Seconds a visitor's session lives without a datagram either way.
DEFAULT_IDLE_TIMEOUT = 60.0
#: Sessions one entrance holds at once; a new visitor beyond it is dropped.
DEFAULT_MAX_SESSIONS = 1024


@dataclass(frozen=True)
class DatagramLimits:
    """
    The limits of one UDP entrance.

    @ivar idle_timeout: see L{DEFAULT_IDLE_TIMEOUT}.
    @ivar max_sessions: see L{DEFAULT_MAX_SESSIONS}.
    """

    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    max_sessions: int = DEFAULT_MAX_SESSIONS

    def __post_init__(self) -> None:
        if not self.idle_timeout > 0:
            raise ValueError(f"idle timeout {self.idle_timeout} is not positive")
        if self.max_sessions < 1:
            raise ValueError(f"max sessions {self.max_sessions} is below 1")


@dataclass
class DatagramCounts:
    """
    What one or more L{SessionTable}s did with datagrams.

    @ivar received: datagrams from visitors.
    @ivar forwarded: those a session took.
    @ivar dropped: those dropped: a session's queue was full, the table
        was full, or no session could be opened.
    @ivar returned: datagrams that came back to visitors.
    """

    received: int = 0
    forwarded: int = 0
    dropped: int = 0
    returned: int = 0


class _Entry:
    """
    One visitor's session: its peer, when it last carried a datagram, and
    its idle timer.
    """

    __slots__ = ("peer", "last", "timer")

    def __init__(self, last: float) -> None:
        self.peer: IDatagramPeer | None = None
        self.last = last
        self.timer: Any = None


class SessionTable:
    """
    See the module.

    @ivar counts: what it did with datagrams (shared with other tables if
        given: a relay's public UDP ports count together).
    """

    def __init__(
        self, opener: IDatagramOpener, clock: IReactorTime,
        reply: Callable[[bytes, Address], None], limits: DatagramLimits | None = None,
        counts: DatagramCounts | None = None,
    ) -> None:
        self.opener = opener
        self.clock = clock
        self.reply = reply
        self.limits = limits or DatagramLimits()
        self.counts = counts if counts is not None else DatagramCounts()
        self._entries: dict[Address, _Entry] = {}

    @property
    def received(self) -> int:
        """
        L{DatagramCounts.received}.
        """
        return self.counts.received

    @property
    def forwarded(self) -> int:
        """
        L{DatagramCounts.forwarded}.
        """
        return self.counts.forwarded

    @property
    def dropped(self) -> int:
        """
        L{DatagramCounts.dropped}.
        """
        return self.counts.dropped

    @property
    def returned(self) -> int:
        """
        L{DatagramCounts.returned}.
        """
        return self.counts.returned

    def __len__(self) -> int:
        return len(self._entries)

    def datagramReceived(self, payload: bytes, address: Address) -> None:
        """
        A visitor's datagram: forward it on its session, opened now if it
        has none.
        """
        counts = self.counts
        counts.received += 1
        entry = self._entries.get(address)
        if entry is None:
            entry = self._open(address)
            if entry is None:
                counts.dropped += 1
                return
        entry.last = self.clock.seconds()
        peer = entry.peer
        if peer is not None and peer.send(payload):
            counts.forwarded += 1
        else:
            counts.dropped += 1

    def _open(self, address: Address) -> _Entry | None:
        if len(self._entries) >= self.limits.max_sessions:
            return None
        entry = _Entry(self.clock.seconds())
        self._entries[address] = entry

        def deliver(payload: bytes) -> None:
            entry.last = self.clock.seconds()
            self.counts.returned += 1
            self.reply(payload, address)

        def ended() -> None:
            self._forget(address, entry)

        peer = self.opener.openPeer(address, deliver, ended)
        if peer is None or self._entries.get(address) is not entry:
            self._forget(address, entry)
            return None
        entry.peer = peer
        entry.timer = self.clock.callLater(self.limits.idle_timeout, self._check, address, entry)
        return entry

    def _check(self, address: Address, entry: _Entry) -> None:
        entry.timer = None
        left = entry.last + self.limits.idle_timeout - self.clock.seconds()
        if left > 0:
            entry.timer = self.clock.callLater(left, self._check, address, entry)
            return
        self._end(address, entry)

    def _end(self, address: Address, entry: _Entry) -> None:
        self._forget(address, entry)
        if entry.peer is not None:
            entry.peer.close()

    def _forget(self, address: Address, entry: _Entry) -> None:
        if self._entries.get(address) is entry:
            del self._entries[address]
        if entry.timer is not None and entry.timer.active():
            entry.timer.cancel()
        entry.timer = None

    def close(self) -> None:
        """
        End every session (the entrance is stopping).
        """
        for address, entry in list(self._entries.items()):
            self._end(address, entry)
