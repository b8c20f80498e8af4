"""
Several relays as one, with real processes: a C{redis-server}, three
C{nfltr relay --directory ... --replica-listen ...} replicas sharing a
cluster CA, agents on different replicas, and visitors through every
replica: C{tcp-connect} (raw link and WebSocket) and share URLs (e2ee,
passthrough, inspect), each carried over the
replica link when the agent is elsewhere, 8 MiB each way verified by
sha256; another account refused identically on every replica, even when a
forged presence record says the agent is that account's.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from twisted.trial.unittest import SynchronousTestCase

from .cut_proxy import CutProxy
from .harness import exchange, missing, nfltr, run
from .service import pattern
from .test_redis_directory import NOTICE_WITHIN, RedisStack, start_redis_process
from .test_shares import make_tls_service_cert
from .test_ssh import SSHStack
from .test_tcp_tunnel import download, upload
from .web_service import pattern as web_pattern

MiB = 1024 * 1024
SIZE = 8 * MiB
REPLICAS = 3
CURL_TIMEOUT = 120
REFUSED = "no such agent or port (or not yours)"
#: How long a forwarding replica may take to give up on a dead peer (the replica link's dial
#: timeout, nfltr.relay.cluster.peers.DIAL_TIMEOUT) and how long the kernel's reset of a killed
#: process's connections may take to arrive, at most.
DIAL_TIMEOUT = 5.0
LIVENESS = 15.0


class ReplicasCase(SynchronousTestCase):
    """
    Three replicas on one host, one Redis directory: what the tests below
    start.
    """

    skip = missing("redis-server", "redis-cli", "curl")
    #: The replicas' --presence-ttl.  The longest by default: the first refresh, which would
    #: undo the record test_everyReplica forges, comes 100 s after the start, after its last
    #: look-up.
    presenceTTL = "300"

    def setUp(self) -> None:
        tmp, self.redis = start_redis_process(self)
        self.tmp = tmp
        ca = tmp / "cluster-ca"
        done = run("cluster-ca", "init", str(ca))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.replicas: list[RedisStack] = []
        self.ids: list[str] = []
        for i in range(REPLICAS):
            listen = ("--replica-listen", "tcp:0:interface=127.0.0.1")
            stack = RedisStack(tmp / f"replica{i}", self.redis.url, *listen,
                               "--cluster-ca", str(ca), "--presence-ttl", self.presenceTTL,
                               *self.replicaArgs(i))
            self.addCleanup(stack.close)
            found = stack.relay.wait_for(r"replica ([0-9a-f]+): replica link on 127\.0\.0\.1:\d+")
            self.ids.append(found.group(1))
            self.replicas.append(stack)

    def replicaArgs(self, i: int) -> tuple[str, ...]:
        """
        More options for replica C{i} (the last C{--replica-listen} wins).
        """
        return ()

    def forwarded(self) -> int:
        """
        An agent on replica 0 and a connector to it through replica 1; the
        connector's local port.
        """
        first, second = self.replicas[0], self.replicas[1]
        key = first.key("alice")
        service = first.service()
        _, pin = first.agent(key, "web", service)
        assert pin is not None
        return second.connector(key, "web", service, "--pin", pin)[1]

    def curl(self, ca: str, host: str, port: int, *args: str) -> bytes:
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--cacert", ca,
             "--resolve", f"{host}:{port}:127.0.0.1", *args],
            capture_output=True, timeout=CURL_TIMEOUT, check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"curl through port {port} failed: {done.stderr.decode()}")
        return done.stdout

    def notFound(self, stack: RedisStack) -> float:
        """
        The TCP sessions C{stack}'s relay refused as not found.
        """
        with urllib.request.urlopen(f"http://{stack.info['admin']}/metrics",
                                    timeout=CURL_TIMEOUT) as response:
            text = response.read().decode()
        pattern = r'nfltr_sessions_total\{kind="tcp",outcome="not_found"\} ([0-9.e+]+)'
        found = re.search(pattern, text)
        return float(found.group(1)) if found else 0.0



class ReplicaTests(ReplicasCase):
    """
    Visitors through every replica.
    """

    def test_everyReplica(self) -> None:
        """
        A TCP agent and an inspect share on replica 0, an e2ee share on
        replica 1 and a passthrough share on replica 2 are reached through
        every replica, 8 MiB each way intact; bob's connector is refused the
        same way on every replica, including the one that holds the agent,
        while a forged presence record names bob's account as the agent's.
        """
        first, second = self.replicas[0], self.replicas[1]
        agentKey, shareKey = first.key("alice"), first.key("alice")
        clientKey, bobKey = first.key("alice"), first.key("bob")
        service = first.service()
        _, pin = first.agent(agentKey, "web", service)
        assert pin is not None
        web = second.web_service()
        second.http_agent(shareKey, "blog", web)
        shareCA = str(second.data / "tls" / "share-ca.crt")
        # A passthrough share on replica 2: the service ends TLS with its own certificate.
        third = self.replicas[2]
        serviceCA, cert, certKey = make_tls_service_cert(self.tmp / "raw-tls", "raw.localhost")
        raw = third.web_service("--tls", str(cert), str(certKey))
        third.http_agent(third.key("alice"), "raw", raw, "--mode", "passthrough")
        # An inspect share on replica 0: the replica that holds it ends its TLS.
        first.http_agent(first.key("alice"), "page", first.web_service(), "--mode", "inspect")
        shares = [("blog", shareCA), ("raw", str(serviceCA)),
                  ("page", str(first.data / "tls" / "share-ca.crt"))]
        data = self.tmp / "upload.bin"
        data.write_bytes(pattern(7, SIZE))
        digest = hashlib.sha256(pattern(7, SIZE)).hexdigest()
        for i, stack in enumerate(self.replicas):
            _, local = stack.connector(clientKey, "web", service, "--pin", pin)
            self.assertTrue(upload(local, i, SIZE), f"upload through replica {i}")
            self.assertTrue(download(local, i, SIZE), f"download through replica {i}")
            # The link carried in WebSocket messages takes the same path.
            _, local = stack.connector(clientKey, "web", service, "--pin", pin,
                                       "--transport", "websocket")
            self.assertTrue(upload(local, i, SIZE), f"upload over WebSocket through {i}")
            port = int(stack.address.rsplit(":", 1)[1])
            for name, ca in shares:
                host = f"{name}.localhost"
                url = f"https://{host}:{port}/"
                body = self.curl(ca, host, port, f"{url}bytes/{SIZE}")
                self.assertEqual(hashlib.sha256(body).hexdigest(),
                                 hashlib.sha256(web_pattern(SIZE)).hexdigest(),
                                 f"{name} download through replica {i}")
                answer = self.curl(ca, host, port, "--data-binary", f"@{data}", f"{url}sha256")
                self.assertEqual(answer.decode().strip(), digest, f"{name} upload through {i}")
        # A forged record says bob's account holds web: the forwarding replicas believe it
        # and forward bob's session with his key; the holding replica checks the key itself.
        forged = subprocess.run(
            ["redis-cli", "-s", str(self.redis.socket), "HSET", "nfltr:presence:agent:web",
             "account", "bob"], capture_output=True, timeout=CURL_TIMEOUT, check=True)
        self.assertEqual(forged.stdout.strip(), b"0")  # the field existed: overwritten
        refusals = []
        for stack in self.replicas:
            bob = stack.start(
                nfltr("tcp-connect", "web", str(service), "--listen", "127.0.0.1:0", "--pin", pin,
                      *stack.relay_args()),
                "bob's tcp-connect", {"NFLTR_KEY": bobKey},
            )
            status = bob.wait_exit()
            lines = [line[line.index("web:"):] for line in bob.output().splitlines()
                     if REFUSED in line]
            refusals.append((status, lines))
        self.assertNotEqual(refusals[0][0], 0)
        self.assertEqual(len(refusals[0][1]), 1, refusals)
        self.assertIn(f"web:{service}: {REFUSED}", refusals[0][1][0])
        self.assertEqual(refusals, [refusals[0]] * REPLICAS)
        # The holding replica refused all three: its own client and the two forwarded (the
        # forwarding replicas found bob's account in the forged record and sent his key on).
        self.assertEqual(self.notFound(first), 3.0)
        self.assertEqual([self.notFound(stack) for stack in self.replicas[1:]], [0.0, 0.0])
        self.assertIn(b"bob", subprocess.run(
            ["redis-cli", "-s", str(self.redis.socket), "HGET", "nfltr:presence:agent:web",
             "account"], capture_output=True, timeout=CURL_TIMEOUT, check=True).stdout)



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
        agent on replica 0 keeps carrying bytes; a new one is closed (the
        look-up cannot be made).  Redis started again: new sessions through
        replica 1 reach the agent again.
        """
        local = self.forwarded()
        with socket.create_connection(("127.0.0.1", local), timeout=30) as sock:
            sock.sendall(b"ECHO\nbefore")
            self.assertEqual(sock.recv(6), b"before")
            self.redis.stop()
            sock.sendall(b"during")
            self.assertEqual(sock.recv(6), b"during")
            self.assertTrue(closed(lambda: exchange(local, b"ECHO\nx", timeout=30)))
            self.redis.start()
            deadline = time.monotonic() + NOTICE_WITHIN
            while not echoed(local):
                self.assertLess(time.monotonic(), deadline, "not routed again after Redis")
                time.sleep(0.2)
            sock.sendall(b"after")
            self.assertEqual(sock.recv(5), b"after")

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


def free_port() -> int:
    """
    A TCP port free on 127.0.0.1 now.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


class SSHAcrossReplicasTests(ReplicasCase):
    """
    What C{ssh -R} publishes on replica 0 (its SSH port) is reached through
    the other replicas too: it goes through the same claim place.
    """

    skip = missing("redis-server", "redis-cli", "curl", "ssh", "ssh-keygen")

    def replicaArgs(self, i: int) -> tuple[str, ...]:
        return ("--ssh", "tcp:0:interface=127.0.0.1") if i == 0 else ()

    def test_sshShares(self) -> None:
        """
        A TCP share (C{ssh -R 0:...}) is reached by C{tcp-connect --e2ee
        false} through replica 1, and an HTTP share (C{ssh -R NAME:80:...},
        inspect) by a browser through replica 2.
        """
        first = self.replicas[0]
        ssh = SSHStack(first)
        key = first.tmp / "id-alice"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                       check=True, stdin=subprocess.DEVNULL, timeout=CURL_TIMEOUT)
        apiKey = first.key("alice")
        done = run("keys", "add-ssh", "--account", "alice", f"{key}.pub", "--directory",
                   self.redis.url)
        self.assertEqual(done.returncode, 0, done.stderr)
        service = first.service()
        exposer = ssh.start(key, "-o", "LogLevel=INFO", "-N", "-R", f"0:127.0.0.1:{service}",
                            user="laptop")
        allocated = int(exposer.wait_for(r"Allocated port (\d+)").group(1))
        _, local = self.replicas[1].connector(apiKey, "laptop", allocated, "--e2ee", "false")
        self.assertEqual(exchange(local, b"MARKER across\n"), b"across\n")
        web = first.web_service()
        session = ssh.start(key, "-T", "-R", f"blog:80:127.0.0.1:{web}")
        session.wait_for(r"share URL (https://\S+)")
        third = self.replicas[2]
        port = int(third.address.rsplit(":", 1)[1])
        body = self.curl(str(first.data / "tls" / "share-ca.crt"), "blog.localhost", port,
                         f"https://blog.localhost:{port}/bytes/{MiB}")
        self.assertEqual(body, web_pattern(MiB))
