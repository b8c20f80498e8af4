"""
A SOCKS5 client for the tests' private Tor network (L{tests.tor_network}): a connection
through a client tor's SOCKS port, and what its proxy answered when it could not connect.
Tested by L{tests.integration.test_tor_network}.
"""

from __future__ import annotations

import socket
import struct

LOOPBACK = "127.0.0.1"


def socks5_connect(socks_port: int, host: str, port: int, timeout: float = 60.0) -> socket.socket:
    """
    A connection to C{host}:C{port} through the SOCKS5 proxy on C{socks_port} (no
    authentication, the name resolved by the proxy).

    @raise AssertionError: the proxy refused, with its reply code.
    """
    sock = socket.create_connection((LOOPBACK, socks_port), timeout=timeout)
    sock.sendall(b"\x05\x01\x00")
    if read_exactly(sock, 2) != b"\x05\x00":
        sock.close()
        raise AssertionError("the SOCKS proxy refused our greeting")
    name = host.encode("ascii")
    sock.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack("!H", port))
    reply = read_exactly(sock, 4)
    if reply[1] != 0:
        sock.close()
        raise AssertionError(f"the SOCKS proxy could not connect: reply {reply[1]}")
    if reply[3] == 3:
        read_exactly(sock, read_exactly(sock, 1)[0] + 2)
    else:
        read_exactly(sock, {1: 4, 4: 16}.get(reply[3], 0) + 2)
    return sock


def read_exactly(sock: socket.socket, count: int) -> bytes:
    """
    C{count} bytes from C{sock}.

    @raise AssertionError: it closed first.
    """
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise AssertionError("the SOCKS proxy closed the connection")
        data += chunk
    return data


def echo_through(socks_port: int, message: bytes = b"through tor",
                 timeout: float = 60.0) -> bytes:
    """
    Send C{message} through the proxy on C{socks_port} to a loopback server that answers
    it reversed, and return the answer.

    @raise AssertionError: the proxy could not connect, or the answer did not come.
    """
    with socket.create_server((LOOPBACK, 0)) as server:
        server.settimeout(timeout)
        port = server.getsockname()[1]
        with socks5_connect(socks_port, LOOPBACK, port, timeout) as sock:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(timeout)
                sock.sendall(message)
                conn.sendall(read_exactly(conn, len(message))[::-1])
                return read_exactly(sock, len(message))
