"""
An HTTP/2 visitor for the tests of L{nfltr.http.h2proxy}, on the in-memory
network of L{tests.http.helpers}.
"""

from __future__ import annotations

from typing import Any

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    InformationalResponseReceived,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
)
from twisted.internet.protocol import Protocol

from .helpers import Harness, fixed

MIB = 1024 * 1024


class H2Visitor(Protocol):
    """
    A visitor speaking HTTP/2 with the C{h2} library: records each stream's
    response, body and trailers, and the C{GOAWAY} it got.
    """

    def __init__(self, window: int | None = None) -> None:
        self.conn = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.window = window
        self.responses: dict[int, dict[bytes, bytes]] = {}
        self.informational: dict[int, list[dict[bytes, bytes]]] = {}
        self.bodies: dict[int, bytearray] = {}
        self.trailers: dict[int, dict[bytes, bytes]] = {}
        self.ended: set[int] = set()
        self.reset: dict[int, int] = {}
        self.goaway: int | None = None
        self.lost: Any = None
        self.autoAck = True
        self.sending: dict[int, tuple[bytearray, Any]] = {}

    def connectionMade(self) -> None:
        self.conn.initiate_connection()
        if self.window is not None:
            self.conn.update_settings({4: self.window})
        self.flush()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.transport.write(data)

    def dataReceived(self, data: bytes) -> None:
        if self.goaway is not None:
            return
        for event in self.conn.receive_data(data):
            if isinstance(event, ResponseReceived):
                self.responses[event.stream_id] = dict(event.headers)
            elif isinstance(event, InformationalResponseReceived):
                self.informational.setdefault(event.stream_id, []).append(dict(event.headers))
            elif isinstance(event, DataReceived):
                self.bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
                if self.autoAck:
                    self.conn.acknowledge_received_data(event.flow_controlled_length,
                                                        event.stream_id)
            elif isinstance(event, TrailersReceived):
                self.trailers[event.stream_id] = dict(event.headers)
            elif isinstance(event, StreamEnded):
                self.ended.add(event.stream_id)
            elif isinstance(event, StreamReset):
                self.reset[event.stream_id] = event.error_code
            elif isinstance(event, ConnectionTerminated):
                self.goaway = event.error_code
        self.sendBodies()
        self.flush()

    def connectionLost(self, reason: Any = None) -> None:
        self.lost = reason

    def get(self, path: bytes = b"/", method: bytes = b"GET", body: bytes | None = None,
            extra: list[tuple[bytes, bytes]] | None = None,
            trailers: list[tuple[bytes, bytes]] | None = None) -> int:
        """
        Send a request; its stream.
        """
        sid = self.conn.get_next_available_stream_id()
        headers = [(b":method", method), (b":path", path), (b":scheme", b"https"),
                   (b":authority", b"example.test"), *(extra or [])]
        self.conn.send_headers(sid, headers, end_stream=body is None)
        if body is not None:
            self.sending[sid] = (bytearray(body), trailers)
            self.sendBodies()
        self.flush()
        return sid

    def sendBodies(self) -> None:
        """
        What the windows let through of the request bodies.
        """
        for sid, (body, trailers) in list(self.sending.items()):
            while body:
                size = min(self.conn.local_flow_control_window(sid), 16384, len(body))
                if size <= 0:
                    break
                self.conn.send_data(sid, bytes(body[:size]))
                del body[:size]
            if not body:
                del self.sending[sid]
                if trailers is None:
                    self.conn.end_stream(sid)
                else:
                    self.conn.send_headers(sid, trailers, end_stream=True)


def h2Harness(handler: Any = None, **options: Any) -> Harness:
    """
    A harness whose proxy takes HTTP/2 from the visitors ALPN says so.
    """
    return Harness(handler or fixed(b"hello"), stream=True, h2=True, **options)


def visit(harness: Harness, visitor: Protocol, alpn: bytes | None = b"h2") -> Any:
    """
    Connect C{visitor} through a new proxy whose handshake chose C{alpn}.
    """
    chooser = harness.factory.buildProtocol(None)
    serverEnd, _ = harness.network.connect(chooser, visitor)
    serverEnd.negotiatedProtocol = alpn
    chooser.handshakeCompleted()
    harness.network.run()
    return chooser
