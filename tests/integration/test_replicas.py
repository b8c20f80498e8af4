"""
Several relays as one, with real processes: a C{redis-server}, three
C{nfltr relay --directory ... --replica-listen ...} replicas sharing a
cluster CA, agents on different replicas, and visitors through every
replica: C{tcp-connect} (raw link and WebSocket) and share URLs (e2ee,
passthrough, inspect), each carried over the replica link when the agent is
elsewhere, 8 MiB each way verified by sha256; another account refused
identically on every replica, even when a forged presence record says the
agent is that account's; what C{ssh -R} publishes, through every replica.
Faults are in L{tests.integration.test_replica_faults}.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from .harness import exchange, missing, nfltr, run
from .service import pattern
from .test_redis_directory import RedisStack, start_redis_process
from .test_shares import make_tls_service_cert
from .test_ssh import SSHStack
from .test_tcp_tunnel import download, upload
from .web_service import pattern as web_pattern

MiB = 1024 * 1024
SIZE = 8 * MiB
REPLICAS = 3
CURL_TIMEOUT = 120
REFUSED = "no such agent or port (or not yours)"


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
    #: How many replicas to start.
    replicaCount = REPLICAS

    def setUp(self) -> None:
        tmp, self.redis = start_redis_process(self)
        self.tmp = tmp
        ca = tmp / "cluster-ca"
        done = run("cluster-ca", "init", str(ca))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.replicas: list[RedisStack] = []
        self.ids: list[str] = []
        for i in range(self.replicaCount):
            self.prepare(i)
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

    def prepare(self, i: int) -> None:
        """
        Called before replica C{i} starts (its stack's directory is
        C{self.tmp / f"replica{i}"}).
        """

    def sshKey(self, account: str, name: str = "") -> Path:
        """
        A new ed25519 key registered to C{account} in the directory (its
        file named for the account, and C{name}).
        """
        path = self.tmp / f"id-{account}{name}"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                       check=True, stdin=subprocess.DEVNULL, timeout=CURL_TIMEOUT)
        self.registerSSHKey(account, path)
        return path

    def registerSSHKey(self, account: str, path: Path) -> None:
        """
        Register the key at C{path} (its public half at C{path}.pub) to
        C{account} in the directory (the account created if needed).
        """
        self.replicas[0].key(account)  # creates the account
        done = run("keys", "add-ssh", "--account", account, f"{path}.pub", "--directory",
                   self.redis.url)
        self.assertEqual(done.returncode, 0, done.stderr)

    def forwarded(self) -> int:
        """
        An agent on replica 0 and a connector to it through replica 1
        (C{self.connector}); the connector's local port.  Its sessions are
        plain ones (C{--resume-timeout 0}): the fault tests show how a fault
        ends them; resumable ones survive a replica's death
        (L{tests.integration.test_resume_replicas}).
        """
        first, second = self.replicas[0], self.replicas[1]
        key = first.key("alice")
        service = first.service()
        _, pin = first.agent(key, "web", service)
        assert pin is not None
        self.connector, local = second.connector(key, "web", service, "--pin", pin,
                                                 "--resume-timeout", "0")
        return local

    def curl(self, ca: str, host: str, port: int, *args: str) -> bytes:
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--cacert", ca,
             "--resolve", f"{host}:{port}:127.0.0.1", *args],
            capture_output=True, timeout=CURL_TIMEOUT, check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"curl through port {port} failed: {done.stderr.decode()}")
        return done.stdout

    def metric(self, stack: RedisStack, series: str) -> float:
        """
        The value of C{series} (a name and its labels, as exposed) on
        C{stack}'s relay's C{/metrics}; 0 if absent.
        """
        with urllib.request.urlopen(f"http://{stack.info['admin']}/metrics",
                                    timeout=CURL_TIMEOUT) as response:
            text = response.read().decode()
        found = re.search(re.escape(series) + r" ([0-9.e+]+)", text)
        return float(found.group(1)) if found else 0.0

    def notFound(self, stack: RedisStack) -> float:
        """
        The TCP sessions C{stack}'s relay refused as not found.
        """
        return self.metric(stack, 'nfltr_sessions_total{kind="tcp",outcome="not_found"}')


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
        # Replica 1 forwarded every session (tcp: a probe and a session per connector; share:
        # two requests per share not its own), and has a link to both peers.
        second = self.replicas[1]
        self.assertGreaterEqual(
            self.metric(second, 'nfltr_replica_sessions_forwarded_total{kind="tcp"}'), 4)
        self.assertGreaterEqual(
            self.metric(second, 'nfltr_replica_sessions_forwarded_total{kind="share"}'), 4)
        self.assertEqual(self.metric(second, "nfltr_replica_peers_up"), 2)
        self.assertGreater(
            self.metric(first, 'nfltr_replica_link_bytes_total{direction="out"}'), 2 * SIZE)
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


class SharedPortTests(ReplicasCase):
    """
    The three replicas listen on one TLS port (C{--tls reuseport:PORT}):
    the kernel spreads visitors over them.
    """

    #: Requests made, each on a new connection: the chance that all land on
    #: the replica holding the share is 3 ** -REQUESTS.
    REQUESTS = 16

    def setUp(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.shared = sock.getsockname()[1]
        super().setUp()

    def replicaArgs(self, i: int) -> tuple[str, ...]:
        return ("--tls", f"reuseport:{self.shared}:interface=127.0.0.1")

    def prepare(self, i: int) -> None:
        """
        Replicas behind one address share the relay CA and the share CA
        (docs/replicas.md): the first replica's, copied before the others
        first start.
        """
        if i == 0:
            return
        source = self.replicas[0].data / "tls"
        target = self.tmp / f"replica{i}" / "relay" / "tls"
        target.mkdir(parents=True)
        for name in ("ca.crt", "ca.key", "share-ca.crt", "share-ca.key"):
            shutil.copy2(source / name, target / name)

    def test_spreadOverReplicas(self) -> None:
        """
        Every replica listens on the shared port; an e2ee share held by
        replica 0 answers every request through it intact, those that
        landed elsewhere carried over the replica link; a connector through
        the shared port reaches a TCP agent whichever replica it lands on.
        """
        for stack in self.replicas:
            self.assertEqual(stack.address, f"127.0.0.1:{self.shared}")
        first = self.replicas[0]
        key = first.key("alice")
        first.http_agent(key, "blog", first.web_service())
        ca = str(first.data / "tls" / "share-ca.crt")
        for _ in range(self.REQUESTS):
            body = self.curl(ca, "blog.localhost", self.shared,
                             f"https://blog.localhost:{self.shared}/bytes/{MiB}")
            self.assertEqual(body, web_pattern(MiB))
        forwarded = [self.metric(stack, 'nfltr_replica_sessions_forwarded_total{kind="share"}')
                     for stack in self.replicas]
        self.assertGreater(sum(forwarded[1:]), 0, forwarded)
        service = first.service()
        _, pin = first.agent(key, "web", service)
        assert pin is not None
        for stack in self.replicas:
            _, local = stack.connector(key, "web", service, "--pin", pin)
            self.assertEqual(exchange(local, b"MARKER shared\n"), b"shared\n")
