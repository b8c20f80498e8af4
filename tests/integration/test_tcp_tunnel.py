"""
End to end: a relay, an agent next to a service and a connector, as real
processes on loopback, moving real bytes.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from .harness import StackTestCase, exchange
from .service import pattern

MiB = 1024 * 1024
SIZE = 32 * MiB


def upload(port: int, seed: int, size: int = SIZE) -> bool:
    """
    Send C{size} pattern bytes; the service's sha256 must match.
    """
    data = pattern(seed, size)
    answer = exchange(port, f"UPLOAD {size}\n".encode() + data)
    return answer.strip() == hashlib.sha256(data).hexdigest().encode()


def download(port: int, seed: int, size: int = SIZE) -> bool:
    """
    Receive C{size} pattern bytes, intact.
    """
    return exchange(port, f"DOWNLOAD {size} {seed}\n".encode()) == pattern(seed, size)


def echo(port: int, seed: int) -> bool:
    """
    Send SIZE bytes and read them back while sending.
    """
    data = pattern(seed, SIZE)
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sender = threading.Thread(target=sock.sendall, args=(b"ECHO\n" + data,))
        sender.start()
        got = bytearray()
        while len(got) < SIZE:
            chunk = sock.recv(256 * 1024)
            if not chunk:
                break
            got += chunk
        sender.join()
    return bytes(got) == data


class TunnelTests(StackTestCase):
    """
    Bytes through an end-to-end encrypted TCP tunnel; written once, run per
    transport (L{transport}, options of the agent and the connector).
    """

    transport: tuple[str, ...] = ("--transport", "link")

    def setUp(self) -> None:
        super().setUp()
        self.key = self.stack.key("alice")
        self.service = self.stack.service()
        self.agent, self.pin = self.stack.agent(self.key, "web", self.service, *self.transport)
        self.client, self.local = self.stack.connector(
            self.key, "web", self.service, "--pin", self.pin, *self.transport
        )

    def test_eightConcurrentTunnels(self) -> None:
        """
        8 concurrent tunnels each upload, download and echo 32 MiB through
        one connector; every byte is verified by sha256 or comparison.
        """
        jobs = [(f, n) for n in range(8) for f in (upload, download, echo)]
        with ThreadPoolExecutor(len(jobs)) as pool:
            results = list(pool.map(lambda job: job[0](self.local, job[1]), jobs))
        self.assertEqual(results, [True] * len(jobs))

    def test_stuckReaderDoesNotStallSiblings(self) -> None:
        """
        A visitor that stops reading a download does not delay 8 sibling
        downloads through the same connector and agent.
        """
        stuck = socket.create_connection(("127.0.0.1", self.local), timeout=60)
        self.addCleanup(stuck.close)
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.sendall(f"DOWNLOAD {SIZE} 99\n".encode())
        stuck.recv(1)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda n: download(self.local, n), range(8)))
        self.assertEqual(results, [True] * 8)


def rss(pid: int) -> int:
    """
    The resident memory of process C{pid}, in bytes.
    """
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class TunnelTestsOverWebSocket(TunnelTests):
    """
    The same over the WebSocket transport.
    """

    transport = ("--transport", "websocket")


class IsolationTests(StackTestCase):
    """
    One visitor that never reads does not hold back the others, and costs
    bounded memory.
    """

    def test_stuckGiBDownload(self) -> None:
        """
        While a visitor sits on a 1 GiB download it never reads, 8 concurrent
        1 MiB downloads through the same agent and connector arrive whole,
        and neither the relay nor the agent nor the connector buffers the
        stuck gigabyte (each stays far below it: 200 MiB, a generous bound
        for a bounded buffer, not a measurement).
        """
        key = self.stack.key("alice")
        service = self.stack.service()
        agent, pin = self.stack.agent(key, "web", service)
        client, local = self.stack.connector(key, "web", service, "--pin", str(pin))
        stuck = socket.create_connection(("127.0.0.1", local), timeout=60)
        self.addCleanup(stuck.close)
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.sendall(f"ZEROS {1024 * MiB}\n".encode())
        stuck.recv(1)

        def small(n: int) -> bool:
            answer = exchange(local, f"DOWNLOAD {MiB} {n}\n".encode())
            return answer == pattern(n, MiB)

        for _ in range(3):
            with ThreadPoolExecutor(8) as pool:
                self.assertEqual(list(pool.map(small, range(8))), [True] * 8)
        for process in (self.stack.relay, agent, client):
            self.assertLess(rss(process.popen.pid), 200 * MiB, process.name)


class DataConnectionTests(StackTestCase):
    """
    A busy agent opens extra data connections, and sessions use them.
    """

    def test_busyAgent(self) -> None:
        """
        With 24 sessions open at once, the agent binds extra data
        connections (the relay counts them as data links, not agents), and
        sessions opened then, spread over its links, all carry their bytes.
        """
        key = self.stack.key("alice")
        service = self.stack.service()
        _, pin = self.stack.agent(key, "web", service)
        _, local = self.stack.connector(key, "web", service, "--pin", str(pin))
        held = []
        for n in range(24):
            sock = socket.create_connection(("127.0.0.1", local), timeout=60)
            self.addCleanup(sock.close)
            sock.sendall(b"ECHO\n" + bytes([n]) * 10)
            self.assertEqual(sock.recv(10, socket.MSG_WAITALL), bytes([n]) * 10)
            held.append(sock)
        admin = self.stack.info["admin"]

        def dataLinks() -> tuple[float, str]:
            with urllib.request.urlopen(f"http://{admin}/metrics", timeout=30) as response:
                text = response.read().decode()
            for line in text.splitlines():
                if line.startswith('nfltr_links{role="data"}'):
                    return float(line.split()[-1]), text
            return 0.0, text

        deadline = time.monotonic() + 30
        while (found := dataLinks())[0] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        count, text = found
        self.assertGreaterEqual(count, 1.0, text)
        self.assertIn("nfltr_agents_connected 1.0", text)
        with ThreadPoolExecutor(8) as pool:
            self.assertEqual(list(pool.map(lambda n: download(local, n), range(8))), [True] * 8)
        for n, sock in enumerate(held):
            sock.sendall(bytes([n]) * 1000)
            self.assertEqual(sock.recv(1000, socket.MSG_WAITALL), bytes([n]) * 1000)


class WriteAndCloseTests(StackTestCase):
    """
    A service that writes and closes at once loses nothing.
    """

    def test_burstService200Times(self) -> None:
        """
        200 connections without keep-alive to a service that writes 100 kB
        and closes at once: each gets every byte, then a clean EOF.
        """
        key = self.stack.key("alice")
        size = 100_000
        service = self.stack.service("--burst", str(size))
        _, pin = self.stack.agent(key, "burst", service)
        _, local = self.stack.connector(key, "burst", service, "--pin", pin)
        expected = pattern(size, size)
        failures = [n for n in range(200) if exchange(local, b"") != expected]
        self.assertEqual(failures, [])


class PlainTunnelTests(StackTestCase):
    """
    Without end-to-end encryption the tunnel still works.
    """

    def test_plainDownload(self) -> None:
        """
        With --e2ee false on both ends, 32 MiB download intact.
        """
        key = self.stack.key("alice")
        service = self.stack.service()
        self.stack.agent(key, "plain", service, "--e2ee", "false")
        _, local = self.stack.connector(key, "plain", service, "--e2ee", "false")
        self.assertTrue(download(local, 5))
