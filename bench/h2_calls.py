"""
Python calls per HTTP/2 request through a share's proxy (HTTP/2 to the
visitor, HTTP/1.1 to the service), against the HTTP/1.1 stream path's: a
count, not a time, so it is the same on a busy machine as on a quiet one
(req/s through real processes is bench.shares' business).

The visitor's frames are made before counting (an C{h2} client that is
connected to nothing: its HEADERS for N GETs, and windows opened wide so no
WINDOW_UPDATE is needed), so only the proxy's side is counted: the proxy,
the C{h2} library under it, h11, Twisted, and the in-memory network of the
HTTP tests.  The service answers each request with 1 KiB without parsing
anything.  Requests go one at a time (C{h2-1}: each answered before the
next) or 100 at once (C{h2-100}); C{http1} is the HTTP/1.1 stream path in
the same shape, one at a time.  After counting, the visitor's client reads
what came back and checks every response.

    python -m bench.h2_calls [--requests N] [--top K] [--only PATH] [--plain]

C{--plain} runs the requests without counting calls, for an instruction
count of the whole process under callgrind: run it with two request counts
and divide the difference, e.g.

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python -m bench.h2_calls --only h2-1 --plain --requests 600
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
from collections import Counter
from collections.abc import Callable

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, StreamEnded
from h2.settings import SettingCodes
from twisted.internet.protocol import Protocol

from tests.http.helpers import VISITOR_ADDRESS, Harness, request

RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nContent-Type: text/plain\r\n\r\n"
            + b"x" * 1024)
#: Where a call's file lies, as the tables group them (first match wins).
GROUPS = (("nfltr/http", "proxy"), ("/h2/", "h2"), ("/hpack/", "h2"), ("/hyperframe/", "h2"),
          ("/h11/", "h11"), ("/twisted/", "twisted"), ("tests/http", "network"))
Table = dict[tuple[str, int, str], tuple[int, int, float, float, object]]


class _Service(Protocol):
    """
    Answers each request head it reads (none has a body) with L{RESPONSE}.
    """

    def dataReceived(self, data: bytes) -> None:
        self.transport.write(RESPONSE * data.count(b"\r\n\r\n"))


class _Replay(Protocol):
    """
    A visitor that writes frames made beforehand and keeps what it gets.
    """

    def __init__(self) -> None:
        self.received = bytearray()

    def dataReceived(self, data: bytes) -> None:
        self.received += data


def _client() -> tuple[H2Connection, bytes]:
    """
    A client connected to nothing; its preface, settings and wide windows.
    """
    client = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    client.initiate_connection()
    client.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
    client.increment_flow_control_window(2**31 - 1 - client.inbound_flow_control_window)
    return client, client.data_to_send()


def _get(client: H2Connection) -> bytes:
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, [(b":method", b"GET"), (b":path", b"/"), (b":scheme", b"https"),
                              (b":authority", b"example.test"), (b"user-agent", b"h2load"),
                              (b"accept", b"*/*")], end_stream=True)
    return client.data_to_send()


def _profiled(run: Callable[[], None], counted: bool) -> Table:
    if not counted:
        run()
        return {}
    profile = cProfile.Profile()
    profile.enable()
    run()
    profile.disable()
    # Stats keeps its table as (file, line, function) -> (primitive calls, calls, ...).
    table: Table = pstats.Stats(profile).stats
    return table


def countH2(requests: int, concurrent: int, counted: bool = True) -> Table:
    """
    The calls of C{requests} GETs, C{concurrent} at a time.
    """
    h = Harness(serve=_Service, pool=True, stream=True, h2=True)
    visitor = _Replay()
    client, preface = _client()
    chooser = h.factory.buildProtocol(VISITOR_ADDRESS)
    serverEnd, _ = h.network.connect(chooser, visitor, VISITOR_ADDRESS)
    serverEnd.negotiatedProtocol = b"h2"  # as if ALPN chose it
    chooser.handshakeCompleted()
    visitor.transport.write(preface + _get(client))  # the service connection is made first
    h.network.run()
    batches = [b"".join(_get(client) for _ in range(concurrent))
               for _ in range(requests // concurrent)]

    def run() -> None:
        for batch in batches:
            visitor.transport.write(batch)
            h.network.run()

    table = _profiled(run, counted)
    ended, bodies = set(), Counter[int]()
    for event in client.receive_data(bytes(visitor.received)):
        if isinstance(event, DataReceived):
            bodies[event.stream_id] += len(event.data or b"")
        elif isinstance(event, StreamEnded):
            ended.add(event.stream_id)
    whole = requests // concurrent * concurrent + 1
    if len(ended) != whole or set(bodies.values()) != {1024}:
        raise SystemExit(f"{len(ended)} of {whole} responses ended")
    return table


def countHTTP1(requests: int, counted: bool = True) -> Table:
    """
    The calls of C{requests} keep-alive GETs on the HTTP/1.1 stream path.
    """
    h = Harness(serve=_Service, pool=True, stream=True)
    visitor, _ = h.visit(b"")
    one = request(headers=b"User-Agent: wrk\r\nAccept: */*\r\n")
    h.send(visitor, one)

    def run() -> None:
        for _ in range(requests):
            h.send(visitor, one)

    table = _profiled(run, counted)
    if len(visitor.received) != len(RESPONSE) * (requests + 1):
        raise SystemExit("the HTTP/1.1 responses did not all come")
    return table


def byGroup(table: Table, requests: int) -> dict[str, float]:
    """
    Calls per request by where they are made.
    """
    groups: Counter[str] = Counter()
    for where, calls in table.items():
        group = next((name for part, name in GROUPS if part in where[0]), "other")
        groups[group] += calls[1]
        groups["all"] += calls[1]
    return {name: count / requests for name, count in groups.items()}


def top(table: Table, requests: int, k: int) -> list[tuple[float, str]]:
    """
    The C{k} functions called most per request (outside the network).
    """
    rows = []
    for (path, line, name), calls in table.items():
        if "tests/http" in path:
            continue
        short = "/".join(path.split("/")[-2:])
        rows.append((calls[1] / requests, f"{short}:{line} {name}"))
    return sorted(rows, reverse=True)[:k]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--top", type=int, default=0, help="also list the K most called functions")
    parser.add_argument("--only", choices=("http1", "h2-1", "h2-100"), help="one path alone")
    parser.add_argument("--plain", action="store_true", help="run without counting calls")
    args = parser.parse_args()
    counted = not args.plain
    columns = ("all", "proxy", "h2", "h11", "twisted", "network", "other")
    print(f"{'path':<8}" + "".join(f"{c:>10}" for c in columns) + "   (calls per request)")
    runs = (("http1", lambda: countHTTP1(args.requests, counted)),
            ("h2-1", lambda: countH2(args.requests, 1, counted)),
            ("h2-100", lambda: countH2(args.requests, 100, counted)))
    for name, count in runs:
        if args.only not in (None, name):
            continue
        table = count()
        groups = byGroup(table, args.requests)
        print(f"{name:<8}" + "".join(f"{groups.get(c, 0):>10.1f}" for c in columns))
        for calls, where in top(table, args.requests, args.top):
            print(f"    {calls:8.1f}  {where}")


if __name__ == "__main__":
    main()
