"""
Python calls per keep-alive request through the share HTTP proxy, on its
stream path and on its full (h11) path: a count, not a time, so it is the
same on a busy machine as on a quiet one (it says what the proxy does per
request; req/s through real processes is bench.shares' business).

One visitor connection sends N GET requests in turn (one at a time, each
answered before the next) through the proxy over the in-memory network of
the HTTP tests to a service that answers each with 1 KiB; cProfile counts
every call made meanwhile, and the calls in the proxy (nfltr/http) and h11.

    python -m bench.http_calls [--requests N]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

from twisted.internet.protocol import Protocol

from tests.http.helpers import Harness, request

RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nContent-Type: text/plain\r\n\r\n"
            + b"x" * 1024)


class _Service(Protocol):
    """
    Answers each request head it reads (none has a body) with L{RESPONSE},
    parsing nothing, so its calls are the same on both paths.
    """

    def dataReceived(self, data: bytes) -> None:
        self.transport.write(RESPONSE * data.count(b"\r\n\r\n"))


def count(stream: bool, requests: int) -> tuple[float, float]:
    """
    Calls per request: all of them, and those in the proxy and h11.
    """
    h = Harness(serve=_Service, pool=True, stream=stream)
    visitor, _ = h.visit(b"")
    one = request(headers=b"User-Agent: wrk\r\nAccept: */*\r\n")
    h.send(visitor, one)  # the service connection is made before counting
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(requests):
        h.send(visitor, one)
    profile.disable()
    stats = pstats.Stats(profile)
    # Stats keeps its table as (file, line, function) -> (primitive calls, calls, ...).
    table: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats
    proxy = sum(calls[1] for where, calls in table.items()
                if "nfltr/http" in where[0] or "/h11/" in where[0])
    expected = len(RESPONSE) * (requests + 1)
    if len(visitor.received) != expected:
        raise SystemExit(f"got {len(visitor.received)} bytes, not {expected}")
    return sum(calls[1] for calls in table.values()) / requests, proxy / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    print(f"{'path':<8}{'calls/request':>15}{'in proxy+h11':>15}")
    for name, stream in (("full", False), ("stream", True)):
        total, proxy = count(stream, args.requests)
        print(f"{name:<8}{total:>15.1f}{proxy:>15.1f}")


if __name__ == "__main__":
    main()
