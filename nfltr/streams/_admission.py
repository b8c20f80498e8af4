# -*- test-case-name: tests.test_admission -*-
"""
Admission on the relay's public ports: per source address, how many
connections may be open at once and how fast new ones may come (a token
bucket), and how many connections may be in their handshake at once over
all sources.  Checked when a connection is accepted, before a byte of it is
read.  Pure bookkeeping with the time passed in, no I/O.

Every limit is named in L{AdmissionLimits}, with its default; L{None} turns
one off.  Refusals are counted by reason (L{REASONS}, a closed set fit to
label a metric).

Memory: one small entry per source address with open connections or a
bucket not yet full again, at most C{max_sources} entries; when the table is
full, entries that hold nothing are swept, and if none can go, a new source
is refused (C{busy}) rather than the table growing.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Why a connection was refused.
PER_SOURCE_OPEN = "per_source_open"
PER_SOURCE_RATE = "per_source_rate"
HANDSHAKES = "handshakes"
BUSY = "busy"
REASONS = (PER_SOURCE_OPEN, PER_SOURCE_RATE, HANDSHAKES, BUSY)


@dataclass(frozen=True)
class AdmissionLimits:
    """
    The admission limits of one listener; L{None} turns a limit off.

    @ivar per_source_open: connections one address may have open at once.
    @ivar per_source_rate: new connections per second one address may open,
        on average.
    @ivar per_source_burst: how many it may open at once after a quiet
        spell (the bucket's size).
    @ivar handshakes: connections over all sources that may be in their
        handshake (not yet routed) at once.
    @ivar max_sources: source addresses tracked at once.
    """

    per_source_open: int | None = 2000
    per_source_rate: float | None = 200.0
    per_source_burst: int = 2000
    handshakes: int | None = 10000
    max_sources: int = 100_000


@dataclass
class _Source:
    open: int
    tokens: float
    stamp: float


class Admission:
    """
    Admits or refuses connections by their source address.

    @ivar refused: refusals by reason (every key of L{REASONS}).
    @ivar handshaking: connections admitted and not yet routed.
    """

    def __init__(self, limits: AdmissionLimits | None = None) -> None:
        self.limits = limits or AdmissionLimits()
        self.refused: dict[str, int] = dict.fromkeys(REASONS, 0)
        self.handshaking = 0
        self._sources: dict[str, _Source] = {}

    def admit(self, source: str, now: float) -> str | None:
        """
        Admit a new connection from C{source} at C{now}: L{None} if admitted
        (and counted open and handshaking), else the reason it is refused.
        """
        limits = self.limits
        if limits.handshakes is not None and self.handshaking >= limits.handshakes:
            return self._refuse(HANDSHAKES)
        entry = self._sources.get(source)
        if entry is None:
            if len(self._sources) >= limits.max_sources:
                self.sweep(now)
                if len(self._sources) >= limits.max_sources:
                    return self._refuse(BUSY)
            entry = self._sources[source] = _Source(0, float(limits.per_source_burst), now)
        if limits.per_source_open is not None and entry.open >= limits.per_source_open:
            return self._refuse(PER_SOURCE_OPEN)
        if limits.per_source_rate is not None:
            self._refill(entry, now)
            if entry.tokens < 1:
                return self._refuse(PER_SOURCE_RATE)
            entry.tokens -= 1
        entry.open += 1
        self.handshaking += 1
        return None

    def routed(self) -> None:
        """
        An admitted connection finished its handshake (or was handed on).
        """
        self.handshaking = max(0, self.handshaking - 1)

    def closed(self, source: str, now: float, handshaking: bool) -> None:
        """
        An admitted connection from C{source} closed; C{handshaking} if it
        had not been routed yet.
        """
        if handshaking:
            self.routed()
        entry = self._sources.get(source)
        if entry is None:
            return
        entry.open = max(0, entry.open - 1)
        if entry.open == 0 and self._idle(entry, now):
            del self._sources[source]

    def sweep(self, now: float) -> None:
        """
        Forget the sources with nothing open and a full bucket.
        """
        for source in [s for s, e in self._sources.items() if e.open == 0 and self._idle(e, now)]:
            del self._sources[source]

    def __len__(self) -> int:
        return len(self._sources)

    def _idle(self, entry: _Source, now: float) -> bool:
        if self.limits.per_source_rate is None:
            return True
        self._refill(entry, now)
        return entry.tokens >= self.limits.per_source_burst

    def _refill(self, entry: _Source, now: float) -> None:
        rate = self.limits.per_source_rate
        assert rate is not None
        elapsed = max(0.0, now - entry.stamp)
        entry.tokens = min(float(self.limits.per_source_burst), entry.tokens + elapsed * rate)
        entry.stamp = now

    def _refuse(self, reason: str) -> str:
        self.refused[reason] += 1
        return reason


class TokenBucket:
    """
    C{rate} events per second on average, C{burst} at once.
    """

    def __init__(self, rate: float, burst: int, now: float = 0.0) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.stamp = now

    def take(self, now: float) -> bool:
        """
        Whether one more event may happen at C{now} (and count it).
        """
        self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
