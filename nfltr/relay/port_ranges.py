# -*- test-case-name: tests.relay.test_public_ports -*-
"""
The relay ports an operator lets agents publish (C{--public-ports
20000-20999,21000}): L{PortRanges} and its parser, without I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

from nfltr.wire.messages import is_port_text

#: The most ranges C{--public-ports} takes.
MAX_RANGES = 64
_MAX_PORT = 65535


class PortRangeError(ValueError):
    """
    A port range list is malformed; the text says what is wrong.
    """


@dataclass(frozen=True)
class PortRanges:
    """
    Inclusive port ranges, sorted, not overlapping.
    """

    ranges: tuple[tuple[int, int], ...] = ()

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and any(low <= port <= high for low, high in self.ranges)

    def __iter__(self) -> Iterator[int]:
        for low, high in self.ranges:
            yield from range(low, high + 1)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __len__(self) -> int:
        return sum(high - low + 1 for low, high in self.ranges)

    def __str__(self) -> str:
        return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in self.ranges)


def _port(text: str, spelt: str) -> int:
    text = text.strip()
    if not is_port_text(text) or not 1 <= int(text) <= _MAX_PORT:
        raise PortRangeError(f"{spelt!r}: ports are 1..{_MAX_PORT}")
    return int(text)


def parse_port_ranges(text: str) -> PortRanges:
    """
    Read C{LOW-HIGH} ranges and single ports, comma-separated (C{none} or
    the empty string: no ports).

    @raise PortRangeError: naming the bad part.
    """
    text = text.strip()
    if text.lower() in ("", "none"):
        return PortRanges()
    parts = text.split(",")
    if len(parts) > MAX_RANGES:
        raise PortRangeError(f"at most {MAX_RANGES} ranges")
    ranges = []
    for part in parts:
        start, dash, end = part.partition("-")
        first = _port(start, part)
        last = _port(end, part) if dash else first
        if last < first:
            raise PortRangeError(f"{part.strip()!r}: the range ends before it starts")
        ranges.append((first, last))
    ranges.sort()
    for (_start, high), (low, _end) in pairwise(ranges):
        if low <= high:
            raise PortRangeError(f"ranges overlap at port {low}")
    return PortRanges(tuple(ranges))
