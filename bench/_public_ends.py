# -*- test-case-name: tests.test_bench_public_path -*-
"""
The two ends of L{bench.public_path}'s path, each a process of its own with
a blocking socket (so that they take no turn of the measured process's
reactor, nor its interpreter lock):

    python -m bench._public_ends serve TOTAL
    python -m bench._public_ends visit PORT TOTAL BLOCK

C{serve} listens on 127.0.0.1, prints C{port N}, accepts one connection,
counts what arrives until C{TOTAL} bytes or the end, and prints
C{received N}.  C{visit} connects to C{PORT}, sends C{TOTAL} bytes in
writes of C{BLOCK} (as C{iperf3 -c} does), half-closes and waits for the
close.
"""

from __future__ import annotations

import socket
import sys

#: The service's receive buffer.
RECEIVE = 1 << 20


def serve(total: int) -> None:
    """
    The service: see the module.
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        print(f"port {listener.getsockname()[1]}", flush=True)
        conn, _ = listener.accept()
    received = 0
    buf = bytearray(RECEIVE)
    with conn:
        while received < total:
            n = conn.recv_into(buf)
            if not n:
                break
            received += n
    print(f"received {received}", flush=True)


def visit(port: int, total: int, block: int) -> None:
    """
    The visitor: see the module.
    """
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = memoryview(b"x" * block)
        left = total
        while left > 0:
            piece = data[: min(left, block)]
            conn.sendall(piece)
            left -= len(piece)
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)


def main(argv: list[str]) -> None:
    """
    Run one end.
    """
    if argv[0] == "serve":
        serve(int(argv[1]))
    else:
        visit(int(argv[1]), int(argv[2]), int(argv[3]))


if __name__ == "__main__":
    main(sys.argv[1:])
