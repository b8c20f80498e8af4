"""
The connections a share's agent keeps to its service, with real processes:
visits one after another, each on a new connection that asks to close
(C{Connection: close}), reuse the agent's idle service connections instead
of leaving one more open each, in C{inspect} as in C{e2ee}, on one relay and
through another replica.

The fault soak of issue 17 saw an inspect share's agent hold one more
service connection per visit until the proxy's idle timeout: the relay's
side of a closing visitor connection was paused, so its TLS waited for the
idle timeout to close, and with it the relay's C{http:} session, whose
proxy on the agent kept its service connection (fixed by commit d94a51f,
which reads a closing visitor connection on; these tests fail before it).
"""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path
from urllib.parse import urlsplit

from twisted.trial.unittest import SynchronousTestCase

from .harness import Stack
from .test_replicas import ReplicasCase

VISITS = 12
#: The service connections that may stay open after visits one at a time: the one the agent's
#: pool keeps idle for the next.
REUSED = 1
#: The size of each visit's download or upload.
BODY = 16 * 1024
TIMEOUT = 60
#: Seconds the count of connections must stay the same to be read.
SETTLE = 0.3
#: TCP state ESTABLISHED in /proc/net/tcp.
ESTABLISHED = "01"


def established(port: int) -> int:
    """
    The established TCP connections whose local end is 127.0.0.1:C{port}
    (a service's accepted connections).
    """
    count = 0
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            if state == ESTABLISHED and int(local.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def settled(port: int) -> int:
    """
    L{established}C{(port)} once it has stayed the same for a moment (the
    closes that follow an answer take a little while).
    """
    last, since = established(port), time.monotonic()
    while time.monotonic() - since < SETTLE:
        time.sleep(0.02)
        now = established(port)
        if now != last:
            last, since = now, time.monotonic()
    return last


def visits(port: int, url: str, ca: str, web: int) -> list[int]:
    """
    L{VISITS} visits of C{url} through the TLS port 127.0.0.1:C{port}, each
    on a new TLS connection whose request says C{Connection: close}, as
    C{bench.soak} makes them: a download and an upload in turn; the open
    connections of the service on C{web} after each.
    """
    host = urlsplit(url).hostname or ""
    context = ssl.create_default_context(cafile=ca)
    counts = []
    for i in range(VISITS):
        body = b"x" * BODY if i % 2 else b""
        request = (f"POST /sha256 HTTP/1.1\r\nContent-Length: {BODY}\r\n" if body
                   else f"GET /bytes/{BODY} HTTP/1.1\r\n").encode()
        request += f"Host: {host}\r\nConnection: close\r\n\r\n".encode() + body
        with (socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw,
              context.wrap_socket(raw, server_hostname=host) as sock):
            sock.sendall(request)
            answer = b""
            while data := sock.recv(65536):
                answer += data
        if b" 200 " not in answer.split(b"\r\n", 1)[0]:
            raise AssertionError(f"visit {i}: {answer[:100]!r}")
        counts.append(settled(web))
    return counts


class PoolReuseTests(SynchronousTestCase):
    """
    A relay, a web service, and an agent sharing it.
    """

    def setUp(self) -> None:
        self.stack = Stack(Path(self.mktemp()).absolute())
        self.addCleanup(self.stack.close)
        self.key = self.stack.key("alice")

    def check(self, mode: str, ca: Path) -> None:
        web = self.stack.web_service()
        _, url = self.stack.http_agent(self.key, "blog", web, "--mode", mode)
        counts = visits(int(self.stack.address.rsplit(":", 1)[1]), url, str(ca), web)
        self.assertLessEqual(max(counts), REUSED, counts)

    def test_inspect(self) -> None:
        """
        An C{inspect} share: one service connection stays open (reused by
        the next visit), whatever the number of visits.
        """
        self.check("inspect", self.stack.data / "tls" / "share-ca.crt")

    def test_e2ee(self) -> None:
        """
        An C{e2ee} share: the same.
        """
        self.check("e2ee", self.stack.data / "tls" / "share-ca.crt")


class AcrossReplicasTests(ReplicasCase):
    """
    The same visits through replica 0 to shares held by replica 1.
    """

    replicaCount = 2

    def check(self, mode: str) -> None:
        holding = self.replicas[1]
        web = holding.web_service()
        _, url = holding.http_agent(holding.key("alice"), "blog", web, "--mode", mode)
        port = int(self.replicas[0].address.rsplit(":", 1)[1])
        counts = visits(port, url, str(holding.data / "tls" / "share-ca.crt"), web)
        self.assertLessEqual(max(counts), REUSED, counts)

    def test_inspect(self) -> None:
        """
        An C{inspect} share: one service connection stays open.
        """
        self.check("inspect")

    def test_e2ee(self) -> None:
        """
        An C{e2ee} share: the same.
        """
        self.check("e2ee")
