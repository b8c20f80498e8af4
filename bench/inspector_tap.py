"""
What the agent's request inspector (its tap, L{nfltr.inspect.Ring}) costs
a keep-alive request on the share proxy's stream path, in process: the
proxy over the in-memory network of the HTTP tests, a service that
answers each request with nginx's head and 1 KiB, one visitor connection
sending requests one at a time.  No process, no socket: it says what the
tap adds to the proxy's own work (req/s through real processes is
bench.shares' business).

Three figures, tap off and on: CPU microseconds per request (this
thread's CPU time, so other processes on the machine disturb it less than
wall time; rounds alternate off and on, medians), Python calls per request
(cProfile: a count, the same on a busy machine), and the bytes one kept
exchange holds (tracemalloc, the ring full).

    python -m bench.inspector_tap [--requests N] [--rounds R]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import time
import tracemalloc
from collections.abc import Callable

from twisted.internet.protocol import Protocol

from nfltr.inspect import Ring
from tests.http.helpers import Harness

REQUEST = b"GET /1k HTTP/1.1\r\nHost: share.localhost\r\nUser-Agent: wrk\r\n\r\n"
RESPONSE = (b"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Thu, 03 Dec 2026 08:30:00 GMT\r\n"
            b"Content-Type: application/octet-stream\r\nContent-Length: 1024\r\n"
            b"Last-Modified: Thu, 03 Dec 2026 08:00:00 GMT\r\nConnection: keep-alive\r\n"
            b'ETag: "6763a1b0-400"\r\nAccept-Ranges: bytes\r\n\r\n' + b"x" * 1024)


class _Service(Protocol):
    """
    Answers each request head it reads with L{RESPONSE}, parsing nothing.
    """

    def dataReceived(self, data: bytes) -> None:
        self.transport.write(RESPONSE * data.count(b"\r\n\r\n"))


def _visitor(tap: bool) -> tuple[Callable[[], None], Harness, Ring | None]:
    """
    A proxy (with a ring as its tap if C{tap}) and a visitor connection
    through it; a call that makes one request.
    """
    h = Harness(serve=_Service, pool=True, stream=True)
    ring = Ring(h.clock.seconds) if tap else None
    h.factory.tap = ring
    visitor, _ = h.visit(b"")

    def one() -> None:
        h.send(visitor, REQUEST)

    for _ in range(200):  # the service connection made, the ring full
        one()
    if not visitor.received.endswith(RESPONSE):
        raise SystemExit("the proxy did not answer as expected")
    return one, h, ring


def cpu(tap: bool, requests: int) -> float:
    """
    CPU microseconds per request.
    """
    one, _, _ = _visitor(tap)
    start = time.thread_time()
    for _ in range(requests):
        one()
    return (time.thread_time() - start) / requests * 1e6


def calls(tap: bool, requests: int) -> float:
    """
    Python calls per request.
    """
    one, _, _ = _visitor(tap)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(requests):
        one()
    profile.disable()
    table: dict[object, tuple[int, int, float, float, object]] = pstats.Stats(profile).stats
    return sum(c[1] for c in table.values()) / requests


def kept_bytes() -> float:
    """
    Bytes held per kept exchange, the ring full of L{REQUEST}s (the
    harness's own records of the bytes that passed are emptied as they go).
    """
    one, h, ring = _visitor(True)
    assert ring is not None
    size = ring.exchanges.maxlen or 1

    def run() -> None:
        for _ in range(size):
            one()
            for end in h.network.ends:
                end.written.clear()
            for visitor in h.visitors:
                visitor.received.clear()

    run()
    ring.exchanges.clear()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    run()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="per round")
    parser.add_argument("--rounds", type=int, default=9, help="each of tap off and on")
    args = parser.parse_args()
    off: list[float] = []
    on: list[float] = []
    for i in range(args.rounds):
        for tap in ((False, True) if i % 2 == 0 else (True, False)):
            (on if tap else off).append(cpu(tap, args.requests))
    low, high = statistics.median(off), statistics.median(on)
    print(f"{'tap':<5}{'CPU us/request (median)':>25}{'min':>8}{'max':>8}{'calls/request':>15}")
    for name, times, tap in (("off", off, False), ("on", on, True)):
        print(f"{name:<5}{statistics.median(times):>25.1f}{min(times):>8.1f}{max(times):>8.1f}"
              f"{calls(tap, min(args.requests, 1000)):>15.1f}")
    print(f"the tap: {high - low:+.1f} us per request ({(high - low) / low:+.0%}); "
          f"one kept exchange holds {kept_bytes():,.0f} bytes")


if __name__ == "__main__":
    main()
