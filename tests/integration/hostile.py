"""
A hostile link client, written against C{docs/link-protocol.md} alone (raw
bytes, stdlib sockets and TLS; nothing of C{nfltr.link}), for
L{tests.integration.test_hostile}.

L{HostileLink} does the handshake as the spec says (preamble, a hello with
whatever window and budget it likes, the relay's preamble, hello and
welcome), then does what the test asks (open sessions, flood frames) and
reads nothing more.  It runs over raw TLS (L{TLSChannel}) or over a
WebSocket (L{WebSocketChannel}: the upgrade of C{GET /link}, masked binary
frames).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import struct
from typing import Any, Protocol

MAGIC = b"\x89NFLTR\r\n"
PREAMBLE = MAGIC + b"\x01"
HEADER = struct.Struct("!BBII")
OPEN, CONTROL = 1, 9
# A receive buffer this small keeps what the kernel holds for a client that
# does not read small: the relay must hold (or not) the rest itself.
SMALL_RCVBUF = 64 * 1024
TIMEOUT = 30.0


def frame(ftype: int, session_id: int, payload: bytes) -> bytes:
    """
    One frame: the 10-byte header (type, flags 0, session id, length), then
    the payload (section 3).
    """
    return HEADER.pack(ftype, 0, session_id, len(payload)) + payload


def open_frame(session_id: int, target: bytes, first: bytes = b"") -> bytes:
    """
    OPEN: u16 target length, target, first bytes (section 4).
    """
    return frame(OPEN, session_id, struct.pack("!H", len(target)) + target + first)


def hello(app: dict[str, Any], window: int, budget: int) -> bytes:
    """
    The preamble and a dialer's hello (section 8) with C{window} and
    C{budget}, and the longest keepalive (section 10), so that the relay
    does not give up on this client while a test watches it.
    """
    message = {
        "type": "hello", "version": 1, "role": "dialer", "window": window, "budget": budget,
        "max_sessions": 1024, "app": app,
        "keepalive": {"interval": 300.0, "timeout": 600.0, "preset": None},
    }
    return PREAMBLE + frame(CONTROL, 0, json.dumps(message, separators=(",", ":")).encode())


class Channel(Protocol):
    """
    A byte stream to the relay.
    """

    sock: socket.socket

    def send(self, data: bytes) -> None: ...

    def recv(self) -> bytes: ...


def _tls(address: str, ca: str) -> ssl.SSLSocket:
    host, port = address.rsplit(":", 1)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_RCVBUF)
    raw.settimeout(TIMEOUT)
    raw.connect((host, int(port)))
    context = ssl.create_default_context(cafile=ca)
    return context.wrap_socket(raw, server_hostname=host)


class TLSChannel:
    """
    Raw TLS to the relay's own name.
    """

    def __init__(self, address: str, ca: str, key: str) -> None:
        self.sock = _tls(address, ca)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> bytes:
        return self.sock.recv(65536)


class WebSocketChannel:
    """
    A WebSocket (RFC 6455) to C{/link} on the relay's own name, subprotocol
    C{nfltr.link.v1}, the key as a bearer token; link bytes in binary frames,
    masked with the key 0 (valid, and no work).
    """

    def __init__(self, address: str, ca: str, key: str) -> None:
        self.sock = _tls(address, ca)
        nonce = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            f"GET /link HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: nfltr.link.v1\r\n"
            f"Authorization: Bearer {key}\r\n\r\n"
        ).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise AssertionError(f"no WebSocket upgrade: {head!r}")
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise AssertionError(f"no WebSocket upgrade: {head!r}")

    def send(self, data: bytes) -> None:
        n = len(data)
        if n < 126:
            length = bytes([0x80 | n])
        elif n < 1 << 16:
            length = bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            length = bytes([0x80 | 127]) + struct.pack("!Q", n)
        self.sock.sendall(b"\x82" + length + b"\0\0\0\0" + data)

    def recv(self) -> bytes:
        """
        The payload of the next binary message (control frames skipped).
        """
        while True:
            while len(self.buffer) < 2 or len(self.buffer) < self._frameSize():
                chunk = self.sock.recv(65536)
                if not chunk:
                    return b""
                self.buffer += chunk
            size, start = self._frameSize(), self._payloadStart()
            opcode, payload = self.buffer[0] & 0x0F, self.buffer[start:size]
            self.buffer = self.buffer[size:]
            if opcode in (0, 2):
                return payload
            if opcode == 8:
                return b""

    def _payloadStart(self) -> int:
        n = self.buffer[1] & 0x7F
        return 2 if n < 126 else 4 if n == 126 else 10

    def _frameSize(self) -> int:
        buf = self.buffer
        n = buf[1] & 0x7F
        if n == 126:
            if len(buf) < 4:
                return 4
            n = struct.unpack_from("!H", buf, 2)[0]
        elif n == 127:
            if len(buf) < 10:
                return 10
            n = struct.unpack_from("!Q", buf, 2)[0]
        return self._payloadStart() + n


class HostileLink:
    """
    A client link that announces what it likes and reads what the test says.

    @ivar welcome: the relay's welcome message.
    """

    def __init__(
        self, channel: Any, address: str, ca: str, key: str, *, window: int = 1 << 30,
        budget: int = 1 << 30,
    ) -> None:
        self.channel: Channel = channel(address, ca, key)
        app = {"role": "client", "key": key, "version": "0"}
        self.channel.send(hello(app, window, budget))
        self.nextId = 1
        self.welcome = self._handshake()

    def _handshake(self) -> dict[str, Any]:
        """
        Read the relay's preamble, its hello and the control message after
        it (the welcome, or a refusal).
        """
        buf = b""
        controls: list[dict[str, Any]] = []
        while len(controls) < 2:
            chunk = self.channel.recv()
            if not chunk:
                raise AssertionError(f"the relay closed the link: {buf[:200]!r}")
            buf += chunk
            if not buf.startswith(PREAMBLE[: len(buf)]):
                raise AssertionError(f"not a link preamble: {buf[:20]!r}")
            body = buf[len(PREAMBLE):]
            controls = []
            while len(body) >= HEADER.size:
                ftype, _, _, length = HEADER.unpack_from(body)
                if len(body) < HEADER.size + length:
                    break
                if ftype == CONTROL:
                    controls.append(json.loads(body[HEADER.size:HEADER.size + length]))
                body = body[HEADER.size + length:]
        if controls[1].get("type") != "welcome":
            raise AssertionError(f"not welcomed: {controls[1]}")
        return controls[1]

    def open(self, target: str, first: bytes = b"") -> int:
        """
        Open a session; its id.
        """
        sid = self.nextId
        self.nextId += 2
        self.channel.send(open_frame(sid, target.encode(), first))
        return sid

    def flood_opens(self, count: int, batch: int = 10_000) -> int:
        """
        Send up to C{count} OPENs the relay refuses (target C{x}, not a
        client target), reading nothing, until the relay stops taking them
        (the send times out) or cuts the link; how many went.
        """
        sent = 0
        self.channel.sock.settimeout(5.0)
        try:
            while sent < count:
                first = self.nextId
                self.nextId += 2 * batch
                self.channel.send(
                    b"".join(open_frame(first + 2 * n, b"x") for n in range(batch))
                )
                sent += batch
        except (TimeoutError, OSError):
            pass
        return sent

    def close(self) -> None:
        """
        Drop the connection.
        """
        self.channel.sock.close()
