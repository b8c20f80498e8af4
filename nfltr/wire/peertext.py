# -*- test-case-name: tests.wire.test_peertext -*-
"""
What a peer says, made safe to log.

Peers choose the strings they send us (a GOAWAY reason, a refusal, a
target, a user name), and the relay logs some of them.  Logged as they
come, a 60 KiB reason becomes 60 KiB of log per connection, a C{\\n} splits
a line in two (a forged log line), and an escape sequence reaches the
operator's terminal.  Two tools stop that:

  - L{peerText}: a peer's string as one printable line of at most
    L{PEER_TEXT_LIMIT} characters, control characters written as
    C{\\xNN} / C{\\uNNNN} escapes, a cut string ending in C{...}.
  - L{LogThrottle}: at most C{burst} lines per source and kind of line, then
    one line per C{interval} seconds, each saying how many were left out;
    the number of sources it remembers is bounded (L{MAX_THROTTLED_SOURCES}),
    the oldest forgotten first, so a flood of sources cannot grow it.

Sans-I/O: the throttle reads time from a callable it is given.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

#: Characters of a peer's string kept in a log line.
PEER_TEXT_LIMIT = 200
#: Lines of one kind from one source logged before the throttle holds them back.
DEFAULT_BURST = 5
#: Seconds between two lines of one kind from one source once the burst is spent.
DEFAULT_INTERVAL = 60.0
#: Sources (peer addresses, accounts) a throttle remembers.
MAX_THROTTLED_SOURCES = 4096

_ELLIPSIS = "..."


def _escape(char: str) -> str:
    # \xNN for the first 256 (never the short \n, \t forms), \uNNNN, \UNNNNNNNN beyond.
    escaped = char.encode("unicode_escape").decode("ascii")
    return f"\\x{ord(char):02x}" if escaped[1] in "ntr\\'" else escaped


def peerText(value: object, limit: int = PEER_TEXT_LIMIT) -> str:
    """
    C{value} (a peer's string, or bytes decoded as UTF-8 with replacement)
    as one printable line of at most C{limit} characters (escapes count at
    their written length), cut with C{...} when longer.
    """
    if limit < len(_ELLIPSIS) + 1:
        raise ValueError(f"limit {limit} is below {len(_ELLIPSIS) + 1}")
    if isinstance(value, (bytes, bytearray, memoryview)):
        # Decode no more than can be shown: a long value costs nothing more.
        text = bytes(value[: limit * 4]).decode("utf-8", "replace")
    else:
        text = str(value)
    pieces: list[str] = []
    used = 0
    for char in text:
        piece = char if char.isprintable() else _escape(char)
        pieces.append(piece)
        used += len(piece)
        if used > limit:
            break
    if used <= limit:
        return "".join(pieces)
    while used > limit - len(_ELLIPSIS):
        used -= len(pieces.pop())
    return "".join(pieces) + _ELLIPSIS


class LogThrottle:
    """
    Decides whether a line of one kind from one source may be logged now.

    @ivar burst: lines allowed at once per source and kind.
    @ivar interval: seconds per further line once the burst is spent.
    @ivar maxSources: how many (source, kind) pairs are remembered.
    """

    def __init__(
        self, clock: Callable[[], float], burst: int = DEFAULT_BURST,
        interval: float = DEFAULT_INTERVAL, maxSources: int = MAX_THROTTLED_SOURCES,
    ) -> None:
        if burst < 1:
            raise ValueError(f"burst {burst} must be at least 1")
        if interval <= 0:
            raise ValueError(f"interval {interval} must be positive")
        if maxSources < 1:
            raise ValueError(f"maxSources {maxSources} must be at least 1")
        self._clock = clock
        self.burst = burst
        self.interval = interval
        self.maxSources = maxSources
        # (source, kind) -> [tokens, when the tokens were counted, lines held back]
        self._state: OrderedDict[tuple[str, str], list[float]] = OrderedDict()

    def allow(self, source: str, kind: str) -> int | None:
        """
        Whether a line of C{kind} from C{source} may be logged now.

        @return: C{None} to leave the line out; otherwise how many lines of
            this kind from this source were left out since the last one
            logged (say so in the line when it is not 0).
        """
        now = self._clock()
        key = (source, kind)
        state = self._state.get(key)
        if state is None:
            state = [float(self.burst), now, 0.0]
            self._state[key] = state
            if len(self._state) > self.maxSources:
                self._state.popitem(last=False)
        else:
            self._state.move_to_end(key)
            elapsed = max(0.0, now - state[1])
            state[0] = min(float(self.burst), state[0] + elapsed / self.interval)
            state[1] = now
        if state[0] < 1.0:
            state[2] += 1
            return None
        state[0] -= 1.0
        held, state[2] = int(state[2]), 0.0
        return held

    def __len__(self) -> int:
        return len(self._state)
