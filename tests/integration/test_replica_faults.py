"""
Faults with several relays as one, with real processes (see
L{tests.integration.test_replicas}): a stuck reader across replicas, the
holding replica killed or drained, Redis stopped and started, and the
replica link cut by a proxy.  Each reports nothing but its outcome; the
partition test prints how long the session took to end and routing to
recover.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .cut_proxy import CutProxy
from .harness import exchange
from .service import pattern
from .test_redis_directory import NOTICE_WITHIN
from .test_replicas import SIZE, MiB, ReplicasCase
from .test_ssh import free_port
from .test_tcp_tunnel import download
from .web_service import pattern as web_pattern

#: How long a forwarding replica may take to give up on a dead peer (the replica link's dial
#: timeout, nfltr.relay.cluster.peers.DIAL_TIMEOUT) and how long a link's liveness (the default
#: preset: 5 s + 10 s) may take to find a silent peer, at most.
DIAL_TIMEOUT = 5.0
LIVENESS = 15.0


def closed(read: Callable[[], bytes]) -> bool:
    """
    Whether C{read()} finds its connection closed (an end of stream or a
    reset) rather than bytes.
    """
    try:
        return read() == b""
    except ConnectionResetError:
        return True


def echoed(port: int) -> bool:
    """
    Whether a connection to C{port} echoes a byte back (the agent is reached).
    """
    try:
        return exchange(port, b"ECHO\nx", half_close=True, timeout=30) == b"x"
    except ConnectionResetError:
        return False


class ReplicaFaultTests(ReplicasCase):
    """
    Faults with three replicas: a short presence TTL, so that what a dead
    replica left runs out within the test.
    """

    presenceTTL = "3"

    def test_stuckReaderAcrossReplicas(self) -> None:
        """
        A visitor through replica 1 that stops reading a download from an
        agent on replica 0 holds only its own session: 8 sibling downloads
        over the same connector and replica link finish intact.
        """
        local = self.forwarded()
        stuck = socket.create_connection(("127.0.0.1", local), timeout=60)
        self.addCleanup(stuck.close)
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.sendall(f"DOWNLOAD {4 * SIZE} 99\n".encode())
        stuck.recv(1)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda n: download(local, n, SIZE), range(8)))
        self.assertEqual(results, [True] * 8)

    def test_holderKilled(self) -> None:
        """
        Replica 0, holding the agent, is killed: a session through replica 1
        ends (never hangs), a new one through replica 1 is closed within the
        dial timeout, and once the TTL ran out replica 1 answers at once, as
        for an agent that does not exist.
        """
        local = self.forwarded()
        with socket.create_connection(("127.0.0.1", local), timeout=30) as sock:
            sock.sendall(b"ECHO\nhello")
            self.assertEqual(sock.recv(5), b"hello")
            os.killpg(self.replicas[0].relay.popen.pid, signal.SIGKILL)
            killed = time.monotonic()
            sock.settimeout(DIAL_TIMEOUT + LIVENESS)
            self.assertTrue(closed(lambda: sock.recv(1)))  # ended with an error, not hung
            ended = time.monotonic() - killed
        self.assertLess(ended, DIAL_TIMEOUT + LIVENESS)
        started = time.monotonic()
        self.assertTrue(closed(lambda: exchange(local, b"ECHO\nx", timeout=30)))
        self.assertLess(time.monotonic() - started, DIAL_TIMEOUT + 1)
        time.sleep(float(self.presenceTTL))
        started = time.monotonic()
        self.assertTrue(closed(lambda: exchange(local, b"ECHO\nx", timeout=30)))
        self.assertLess(time.monotonic() - started, 1.0)

    def test_redisAway(self) -> None:
        """
        Redis stopped: a session already forwarded from replica 1 to the
        agent on replica 0 keeps carrying bytes; a share on replica 0
        visited through replica 1 before is still reached through it (its
        presence record remembered, sha256-verified), and so is the agent by
        a new session of the connector (replica 0 checked its key before and
        has not seen it revoked); a share never looked up there fails.
        Redis started again: everything is reached through replica 1 again.
        """
        first = self.replicas[0]
        port = int(self.replicas[1].address.rsplit(":", 1)[1])
        ca = str(first.data / "tls" / "share-ca.crt")
        for name in ("blog", "page"):
            first.http_agent(first.key("alice"), name, first.web_service())
        expected = hashlib.sha256(web_pattern(MiB)).hexdigest()

        def visit(name: str) -> str:
            host = f"{name}.localhost"
            body = self.curl(ca, host, port, f"https://{host}:{port}/bytes/{MiB}")
            return hashlib.sha256(body).hexdigest()

        def reached(name: str) -> bool:
            try:
                return visit(name) == expected
            except AssertionError:
                return False

        local = self.forwarded()
        self.assertEqual(visit("blog"), expected)
        with socket.create_connection(("127.0.0.1", local), timeout=30) as sock:
            sock.sendall(b"ECHO\nbefore")
            self.assertEqual(sock.recv(6), b"before")
            self.redis.stop()
            sock.sendall(b"during")
            self.assertEqual(sock.recv(6), b"during")
            self.assertEqual(visit("blog"), expected)  # remembered: routed without Redis
            self.assertFalse(reached("page"))  # never looked up through replica 1
            self.assertTrue(echoed(local))  # a new session, key and route remembered
            self.replicas[1].relay.wait_for("routing by the records last read")
            first.relay.wait_for("forwarded sessions with a key this replica checked")
            self.redis.start()
            deadline = time.monotonic() + NOTICE_WITHIN
            while not reached("page"):  # looked up in Redis, once it answers again
                self.assertLess(time.monotonic(), deadline, "not routed again after Redis")
                time.sleep(0.2)
            sock.sendall(b"after")
            self.assertEqual(sock.recv(5), b"after")
        self.assertEqual(visit("blog"), expected)
        self.assertTrue(echoed(local))
        self.assertGreaterEqual(
            self.metric(self.replicas[1], 'nfltr_replica_remembered_total{what="presence"}'), 2)
        self.assertGreaterEqual(
            self.metric(first, 'nfltr_replica_remembered_total{what="key"}'), 1)

    def test_drainDuringDownloads(self) -> None:
        """
        Replica 0, holding the agent, gets SIGTERM while 8 downloads from
        it are in flight through replica 1: it drains, and 8 of 8 finish
        intact.
        """
        local = self.forwarded()
        socks = [socket.create_connection(("127.0.0.1", local), timeout=60) for _ in range(8)]
        for n, sock in enumerate(socks):
            self.addCleanup(sock.close)
            sock.sendall(f"DOWNLOAD {SIZE} {n}\n".encode())
        got = [bytearray(sock.recv(65536)) for sock in socks]
        self.assertTrue(all(got), "every download started")
        os.killpg(self.replicas[0].relay.popen.pid, signal.SIGTERM)
        for sock, received in zip(socks, got, strict=True):
            while chunk := sock.recv(256 * 1024):
                received.extend(chunk)
        self.assertEqual([bytes(g) == pattern(n, SIZE) for n, g in enumerate(got)], [True] * 8)
        self.replicas[0].relay.wait_for(r"draining \d+ link")


class PartitionTests(ReplicasCase):
    """
    The replica link to replica 0 goes through a proxy the test can cut.
    """

    presenceTTL = "3"

    def setUp(self) -> None:
        self.proxy = CutProxy()
        self.listenPort = free_port()
        self.proxy.target = ("127.0.0.1", self.listenPort)
        self.addCleanup(self.proxy.close)
        super().setUp()

    def replicaArgs(self, i: int) -> tuple[str, ...]:
        if i != 0:
            return ()
        return ("--replica-listen", f"tcp:{self.listenPort}:interface=127.0.0.1",
                "--replica-address", f"127.0.0.1:{self.proxy.port}")

    def test_partition(self) -> None:
        """
        The replica link between replicas 1 and 0 is cut (bytes stop, the
        sockets stay open): a session across it ends with an error within the
        link's liveness bound (default preset: 5 s + 10 s), never hangs; new
        sessions are closed; once the cut heals, routing recovers.
        """
        local = self.forwarded()
        with socket.create_connection(("127.0.0.1", local), timeout=30) as sock:
            sock.sendall(b"ECHO\nhello")
            self.assertEqual(sock.recv(5), b"hello")
            self.proxy.cut()
            cut = time.monotonic()
            sock.sendall(b"lost")
            sock.settimeout(LIVENESS + DIAL_TIMEOUT)
            self.assertTrue(closed(lambda: sock.recv(1)))
            ended = time.monotonic() - cut
        self.assertLess(ended, LIVENESS + DIAL_TIMEOUT)
        self.assertTrue(closed(lambda: exchange(local, b"ECHO\nx", timeout=30)))
        self.proxy.heal()
        healed = time.monotonic()
        while not echoed(local):
            self.assertLess(time.monotonic() - healed, LIVENESS, "routing did not recover")
            time.sleep(0.2)
        print(f"partition: the session ended {ended:.1f} s after the cut; routing recovered "
              f"{time.monotonic() - healed:.1f} s after the heal")
