"""
Tests for L{nfltr.relay.takeover}: a running relay hands its listening
sockets to a successor over a Unix socket (real sockets, on loopback and in
a temporary directory).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from twisted.internet import reactor
from twisted.internet.protocol import Factory, Protocol
from twisted.trial.unittest import TestCase

from nfltr.relay.takeover import (
    TakeoverError,
    family_of,
    listen_for_successor,
    socket_name,
    take_over,
)


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


class TakeoverTests(TestCase):
    """
    The two sides of a takeover.
    """

    def setUp(self) -> None:
        self.dir = Path(self.mktemp())
        self.dir.mkdir()

    async def test_handsOver(self) -> None:
        """
        The successor gets a descriptor of each listening socket, named by
        its role, on the same address; the running side is told once.  The
        takeover socket is abstract: nothing is left in the data directory.
        """
        tls, http = listening(), listening()
        self.addCleanup(tls.close)
        self.addCleanup(http.close)
        told: list[bool] = []
        port = await listen_for_successor(
            reactor, self.dir, lambda: {"tls": tls.fileno(), "http": http.fileno()},
            lambda: told.append(True))
        self.addCleanup(port.stopListening)
        self.assertEqual(os.listdir(self.dir), [])
        fds = await take_over(reactor, self.dir)
        self.assertEqual(sorted(fds), ["http", "tls"])
        for role, original in (("tls", tls), ("http", http)):
            self.assertEqual(family_of(fds[role]), socket.AF_INET)
            got = socket.socket(fileno=fds[role])
            self.addCleanup(got.close)
            self.assertNotEqual(got.fileno(), original.fileno())
            self.assertEqual(got.getsockname(), original.getsockname())
        self.assertEqual(told, [True])

    def test_names(self) -> None:
        """
        Each data directory has its own abstract socket name.
        """
        self.assertTrue(socket_name(self.dir).startswith("\0nfltr-takeover-"))
        self.assertNotEqual(socket_name(self.dir), socket_name(self.dir / "other"))
        self.assertEqual(socket_name(self.dir), socket_name(self.dir / "x" / ".."))

    async def test_nobodyRuns(self) -> None:
        """
        Without a running relay, the successor says so.
        """
        with self.assertRaises(TakeoverError) as caught:
            await take_over(reactor, self.dir)
        self.assertIn("no relay runs", str(caught.exception))

    async def test_strangeAnswer(self) -> None:
        """
        An answer that is not the expected line (or one naming more sockets
        than came) is an error, and the descriptors that came are closed.
        """
        class Liar(Protocol):
            transport: Any

            def dataReceived(self, data: bytes) -> None:
                self.transport.write(b'{"listeners": ["tls", "tls"]}\n')
                self.transport.loseConnection()

        factory = Factory.forProtocol(Liar)
        port = reactor.listenUNIX(socket_name(self.dir), factory)
        self.addCleanup(port.stopListening)
        with self.assertRaises(TakeoverError) as caught:
            await take_over(reactor, self.dir, timeout=5)
        self.assertIn("could not read", str(caught.exception))

    async def test_notARequest(self) -> None:
        """
        The running side answers nothing but C{take}: anything else is
        closed without a descriptor, and it is not told to stop.
        """
        told: list[bool] = []
        tls = listening()
        self.addCleanup(tls.close)
        port = await listen_for_successor(reactor, self.dir, lambda: {"tls": tls.fileno()},
                                          lambda: told.append(True))
        self.addCleanup(port.stopListening)
        client = socket.socket(socket.AF_UNIX)
        self.addCleanup(client.close)
        client.setblocking(False)
        client.connect(socket_name(self.dir))
        client.send(b"give me everything\n")
        from twisted.internet.task import deferLater

        for _ in range(100):
            await deferLater(reactor, 0.02, lambda: None)
            try:
                if client.recv(100) == b"":
                    break
            except BlockingIOError:
                continue
        self.assertEqual(told, [])
