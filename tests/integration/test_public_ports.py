"""
Public ports with real processes: a relay allowing a few loopback ports,
agents asking for them, visitors connecting straight to the relay's port
with no connector, every byte checked by sha256.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from .harness import Process, Stack, exchange, missing, nfltr
from .service import pattern
from .test_redis_directory import RedisProcess, RedisStack
from .test_ssh import SSHStack

SIZE = 4 * 1024 * 1024


def free_ports(count: int) -> list[int]:
    """
    C{count} loopback ports free now (the OS's choice; bound and let go).
    """
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def checked_upload(port: int, seed: int, size: int = SIZE) -> bool:
    """
    Upload C{size} pattern bytes to the test service behind C{port}: its
    sha256 must come back.
    """
    data = pattern(seed, size)
    answer = exchange(port, f"UPLOAD {size}\n".encode() + data)
    return answer.strip() == hashlib.sha256(data).hexdigest().encode()


def checked_download(port: int, seed: int, size: int = SIZE) -> bool:
    """
    Download C{size} pattern bytes through C{port}, compared by sha256.
    """
    got = exchange(port, f"DOWNLOAD {size} {seed}\n".encode())
    return hashlib.sha256(got).digest() == hashlib.sha256(pattern(seed, size)).digest()


class PublicPortTests(SynchronousTestCase):
    """
    A relay with public ports C{allowed} (two loopback ports) and one port
    outside them (C{outside}).
    """

    def setUp(self) -> None:
        *self.allowed, self.outside = free_ports(3)
        ranges = ",".join(str(port) for port in self.allowed)
        self.stack = Stack(
            Path(self.mktemp()).absolute(),
            relay_extra=("--public-ports", ranges, "--public-ports-interface", "127.0.0.1",
                         "--max-public-ports-per-account", "2", "--lease-time", "600"),
        )
        self.addCleanup(self.stack.close)
        self.alice = self.stack.key("alice")
        self.service = self.stack.service()

    def agent(self, key: str, name: str, *extra: str) -> object:
        return self.stack.start(
            nfltr("tcp", str(self.service), "--name", name, "--state-dir",
                  str(self.stack.tmp / f"agent-{name}"), *self.stack.relay_args(), *extra),
            f"agent {name}", {"NFLTR_KEY": key},
        )

    def test_visitorStraightToThePort(self) -> None:
        """
        A visitor connects to the relay's public port (no connector, no
        key) and reaches the agent's service: 4 MiB each way, intact; the
        agent said where, and that it is not end-to-end encrypted.
        """
        port = self.allowed[0]
        self.stack.relay.wait_for(r"public ports [\d,-]+ on 127\.0\.0\.1, at most 2 per account")
        agent = self.agent(self.alice, "db", "--public-port", str(port))
        line = agent.wait_for(rf"public port 127\.0\.0\.1:{port} -> port {self.service}.*")
        self.assertIn("not end-to-end encrypted", line.group(0))
        self.assertTrue(checked_upload(port, 1))
        self.assertTrue(checked_download(port, 2))

    def test_anyFreePort(self) -> None:
        """
        C{--public-port 0} gets a port in the relay's ranges, printed.
        """
        agent = self.agent(self.alice, "any", "--public-port", "0")
        port = int(agent.wait_for(r"public port 127\.0\.0\.1:(\d+) ->").group(1))
        self.assertIn(port, self.allowed)
        self.assertTrue(checked_download(port, 3, 65536))

    def test_leasedToItsAccount(self) -> None:
        """
        Another account cannot take a port alice holds, nor after her agent
        stopped (the lease lives); her own agent gets it back.
        """
        port = self.allowed[0]
        first = self.agent(self.alice, "db", "--public-port", str(port))
        first.wait_for(r"public port .* ->")
        bob = self.stack.key("bob")
        refused = self.agent(bob, "bobdb", "--public-port", str(port))
        refused.wait_for(rf"public port {port} is leased to another account")
        self.assertNotEqual(refused.wait_exit(), 0)
        first.stop()
        again = self.agent(bob, "bobdb2", "--public-port", str(port))
        again.wait_for(rf"public port {port} is leased to another account")
        back = self.agent(self.alice, "db", "--public-port", str(port))
        back.wait_for(rf"public port 127\.0\.0\.1:{port} ->")
        self.assertTrue(checked_download(port, 4, 65536))

    def test_outsideTheRanges(self) -> None:
        """
        A port outside the operator's ranges is refused, saying so.
        """
        agent = self.agent(self.alice, "out", "--public-port", str(self.outside))
        agent.wait_for(rf"public port {self.outside} is outside the relay's public ports")
        self.assertNotEqual(agent.wait_exit(), 0)
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", self.outside), timeout=2).close()

    def test_allowList(self) -> None:
        """
        With C{--allow-ip} naming another network, a visitor from loopback
        is closed before anything reaches the service.
        """
        port = self.allowed[1]
        agent = self.agent(self.alice, "only", "--public-port", str(port),
                           "--allow-ip", "192.0.2.0/24")
        agent.wait_for(r"public port .* ->")
        try:
            answer = exchange(port, b"MARKER hello\n", timeout=10)
        except ConnectionResetError:
            answer = b""
        self.assertEqual(answer, b"")



class SSHPublicPortTests(SynchronousTestCase):
    """
    C{ssh -R PORT:localhost:SERVICE} with the real OpenSSH client publishes
    the relay's public port PORT, as sshd's C{GatewayPorts} would.
    """

    skip = missing("ssh", "ssh-keygen")

    def setUp(self) -> None:
        self.allowed = free_ports(2)
        self.stack = Stack(
            Path(self.mktemp()).absolute(),
            relay_extra=("--ssh", "tcp:0:interface=127.0.0.1", "--public-ports",
                         ",".join(map(str, self.allowed)), "--public-ports-interface",
                         "127.0.0.1"),
        )
        self.addCleanup(self.stack.close)
        self.ssh = SSHStack(self.stack)
        self.service = self.stack.service()

    def test_remoteForward(self) -> None:
        """
        Visitors reach the service straight through the relay's port (4 MiB
        each way, sha256-checked); another account's C{ssh -R} of the same
        port is refused, and OpenSSH exits.
        """
        port = self.allowed[0]
        key = self.ssh.user_key("alice")
        session = self.ssh.start(key, "-T", "-R", f"{port}:127.0.0.1:{self.service}")
        session.wait_for(rf"public port localhost:{port}: visitors connect straight")
        self.assertTrue(checked_upload(port, 5))
        self.assertTrue(checked_download(port, 6))
        other = self.ssh.run(self.ssh.user_key("bob"), "-N", "-R",
                             f"{port}:127.0.0.1:{self.service}")
        self.assertNotEqual(other.returncode, 0)
        self.assertIn(b"remote port forwarding failed", other.stderr)


class PublicPortsOnRedisTests(SynchronousTestCase):
    """
    A public port's lease is kept in the Redis directory like a name's: it
    outlives the relay.
    """

    skip = missing("redis-server")

    def setUp(self) -> None:
        self.tmp = Path(self.mktemp()).absolute()
        self.redis = RedisProcess(self.tmp / "redis")
        self.addCleanup(self.redis.remove)
        self.redis.start()
        [self.port] = free_ports(1)

    def stack(self) -> RedisStack:
        stack = RedisStack(self.tmp / "stack", self.redis.url, "--public-ports", str(self.port),
                           "--public-ports-interface", "127.0.0.1")
        self.addCleanup(stack.close)
        return stack

    def agent(self, stack: RedisStack, key: str, name: str, service: int) -> Any:
        return stack.start(
            nfltr("tcp", str(service), "--name", name, "--public-port", str(self.port),
                  "--state-dir", str(stack.tmp / f"agent-{name}-{time.monotonic_ns()}"),
                  *stack.relay_args()),
            f"agent {name}", {"NFLTR_KEY": key},
        )

    def test_leaseSurvivesRestart(self) -> None:
        """
        After alice's agent left and the relay restarted, bob is refused her
        port; her agent gets it back and serves visitors.
        """
        stack = self.stack()
        alice, bob = stack.key("alice"), stack.key("bob")
        first = self.agent(stack, alice, "db", stack.service())
        first.wait_for(r"public port .* ->")
        first.stop()
        stack.relay.wait_for(r"agent db \(account alice\) (disconnected|is draining)")
        stack.close()
        again = self.stack()
        service = again.service()
        refused = self.agent(again, bob, "bobdb", service)
        refused.wait_for(rf"public port {self.port} is leased to another account")
        back = self.agent(again, alice, "db", service)
        back.wait_for(rf"public port 127\.0\.0\.1:{self.port} ->")
        self.assertTrue(checked_download(self.port, 9, 65536))


class Iperf3Tests(SynchronousTestCase):
    """
    iperf3 (Debian), its control and data connections both straight to a
    public port: a fixed amount of bytes, not a benchmark.
    """

    skip = missing("iperf3")

    def test_iperf3(self) -> None:
        """
        Each way, iperf3's control connection and data connection go
        through, and its 16 MiB (at least) are sent.  (What the receiver reports is
        counted when the end of the test arrives on the control connection,
        which may overtake data still in the buffers of the three hops: it
        is only checked to be some; the sha256-checked transfers above check
        the bytes.)
        """
        [public, server] = free_ports(2)
        stack = Stack(Path(self.mktemp()).absolute(),
                      relay_extra=("--public-ports", str(public), "--public-ports-interface",
                                   "127.0.0.1"))
        self.addCleanup(stack.close)
        stack.processes.append(Process(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(server)],
                                       name="iperf3 -s"))
        agent, _ = stack.agent(stack.key("alice"), "perf", server, "--e2ee", "false",
                               "--public-port", str(public))
        agent.wait_for(r"public port .* ->")
        for reverse in ((), ("-R",)):
            done = subprocess.run(
                ["iperf3", "-c", "127.0.0.1", "-p", str(public), "-n", "16M", "-J", *reverse],
                capture_output=True, timeout=120, check=False,
            )
            self.assertEqual(done.returncode, 0, done.stderr or done.stdout[-500:])
            report = json.loads(done.stdout)
            # iperf3 sends whole blocks (128 KiB): one more may go after the 16 MiB.
            self.assertGreaterEqual(report["end"]["sum_sent"]["bytes"], 16 * 1024 * 1024)
            self.assertGreater(report["end"]["sum_received"]["bytes"], 0)
