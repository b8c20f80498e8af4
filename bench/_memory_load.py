# -*- test-case-name: tests.bench.test_memory -*-
"""
The service and the load of L{bench.memory}: a small TCP service on
127.0.0.1 in threads of this process, and a bounded load sent to it through
a tunnel's local port.

The service speaks one request format, any number of times per connection:
one byte C{G} or C{P} and a length (8 bytes, big-endian).  C{G N}: it sends
N bytes.  C{P N}: the client then sends N bytes, and the service answers one
byte once it has read them all.  So bulk goes both ways (downloads and
uploads), small requests are C{G 1024}.

The load (L{run_load}) is bounded in bytes, in requests and in time: bulk
(C{mib} MiB each way, over C{streams} connections in parallel), C{big}
requests of 1 MiB and C{requests} of 1 KiB on C{connections} keep-alive
connections, then C{new} requests each on a connection of its own.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ._system import BenchError

GET, PUT = b"G", b"P"
HEAD = 9
CHUNK = 256 * 1024
SMALL = 1024
BIG = 1024 * 1024
_DATA = memoryview(bytes(range(256)) * (CHUNK // 256))


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """
    Exactly C{n} bytes from C{sock}; None at end of stream before any.

    @raise OSError: the stream ended part way.
    """
    parts, left = [], n
    while left:
        part = sock.recv(left)
        if not part:
            if left == n:
                return None
            raise OSError(f"the stream ended {left} bytes short")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def drain(sock: socket.socket, n: int, buffer: bytearray) -> None:
    """
    Read and drop C{n} bytes.
    """
    view = memoryview(buffer)
    while n:
        got = sock.recv_into(view, min(n, len(buffer)))
        if not got:
            raise OSError(f"the stream ended {n} bytes short")
        n -= got


def send_bytes(sock: socket.socket, n: int) -> None:
    """
    Send C{n} bytes of data.
    """
    while n:
        piece = _DATA[: min(n, CHUNK)]
        sock.sendall(piece)
        n -= len(piece)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(60)
        buffer = bytearray(CHUNK)
        try:
            while (head := recv_exact(sock, HEAD)) is not None:
                op, n = head[:1], int.from_bytes(head[1:], "big")
                if op == GET:
                    send_bytes(sock, n)
                elif op == PUT:
                    drain(sock, n, buffer)
                    sock.sendall(b"k")
                else:
                    return
        except OSError:
            return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class Service:
    """
    The service (see the module) on a free port of 127.0.0.1, in threads.
    """

    def __init__(self) -> None:
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.port: int = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Client:
    """
    One connection to the service (through a tunnel's port).
    """

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray(CHUNK)

    def get(self, n: int) -> None:
        """
        Ask for C{n} bytes and read them.
        """
        self.sock.sendall(GET + n.to_bytes(8, "big"))
        drain(self.sock, n, self.buffer)

    def put(self, n: int) -> None:
        """
        Send C{n} bytes and wait for the answer.
        """
        self.sock.sendall(PUT + n.to_bytes(8, "big"))
        send_bytes(self.sock, n)
        if recv_exact(self.sock, 1) != b"k":
            raise OSError("no answer to an upload")

    def close(self) -> None:
        self.sock.close()


def probe(port: int, timeout: float = 5.0) -> None:
    """
    One small request through C{port}.

    @raise OSError: it failed.
    """
    client = Client(port, timeout)
    try:
        client.get(SMALL)
    finally:
        client.close()


@dataclass(frozen=True)
class Load:
    """
    How much load (see the module).
    """

    mib: int = 256
    streams: int = 8
    big: int = 500
    requests: int = 5000
    connections: int = 50
    new: int = 300
    deadline: float = 60.0


def run_load(port: int, load: Load) -> dict[str, Any]:
    """
    Run C{load} through C{port}; what was done and how long it took.

    @raise BenchError: a request failed, or the load outlasted its deadline.
    """
    end = time.monotonic() + load.deadline
    figures: dict[str, Any] = {}

    def in_time() -> None:
        if time.monotonic() > end:
            raise BenchError(f"the load outlasted its deadline ({load.deadline:g}s)")

    def bulk(_: int) -> None:
        per = load.mib * 1024 * 1024 // load.streams
        client = Client(port)
        try:
            for _ in range(0, per, 16 * CHUNK):
                in_time()
                client.get(min(16 * CHUNK, per))
                client.put(min(16 * CHUNK, per))
        finally:
            client.close()

    def keep_alive(count: int, size: int = SMALL) -> None:
        client = Client(port)
        try:
            for _ in range(count):
                in_time()
                client.get(size)
        finally:
            client.close()

    def big(count: int) -> None:
        keep_alive(count, BIG)

    def new_connection(_: int) -> None:
        in_time()
        probe(port, timeout=30.0)

    steps = [
        ("bulk", bulk, range(load.streams), load.streams),
        ("big", big, _spread(load.big, load.connections), load.connections),
        ("keep_alive", keep_alive,
         _spread(load.requests, load.connections), load.connections),
        ("new_connections", new_connection, range(load.new), 10),
    ]
    for name, step, items, workers in steps:
        started = time.monotonic()
        try:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(step, items))
        except OSError as e:
            raise BenchError(f"{name}: {e}") from None
        figures[f"{name}_seconds"] = round(time.monotonic() - started, 2)
    return figures


def _spread(total: int, over: int) -> list[int]:
    """
    C{total} split into C{over} near-equal counts.
    """
    return [total // over + (1 if i < total % over else 0) for i in range(over)]
