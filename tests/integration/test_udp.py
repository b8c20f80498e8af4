# -*- test-case-name: tests.integration.test_udp -*-
"""
UDP through real processes: a relay, C{nfltr udp} in front of a UDP service
(L{tests.integration.udp_service}) and C{nfltr udp-connect}, all on
127.0.0.1 with port 0; the test talks to udp-connect's socket.
"""

from __future__ import annotations

import hashlib
import os
import random
import socket
import struct
import sys
import threading
from pathlib import Path

from twisted.names import dns
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.processes import wait_for_file

from .harness import Stack, StackTestCase, nfltr
from .udp_service import ADDRESS, NAME

#: How long a datagram's answer may take before it counts as lost.
ANSWER_TIMEOUT = 2.0
#: Datagrams in flight at once in the checksum run (a modest rate).
WINDOW = 32
_SEQ = struct.Struct("!I")
_DIGEST = 8


def dns_query(port: int, name: str, tries: int = 3) -> dns.Message:
    """
    Ask the DNS server behind UDP C{port} of 127.0.0.1 for C{name}'s A
    record; its answer (a test failure after C{tries} silent tries).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(ANSWER_TIMEOUT)
        for _ in range(tries):
            query = dns.Message(id=random.randrange(1 << 16))
            query.queries = [dns.Query(name, dns.A)]
            sock.sendto(query.toStr(), ("127.0.0.1", port))
            try:
                data = sock.recv(65535)
            except TimeoutError:
                continue
            answer = dns.Message()
            answer.fromStr(data)
            if answer.id == query.id:
                return answer
    raise AssertionError(f"no DNS answer for {name} after {tries} tries")


def checked_datagram(seq: int, rng: random.Random) -> bytes:
    """
    Datagram C{seq}: its number, random bytes, and a checksum of both.
    """
    body = _SEQ.pack(seq) + rng.randbytes(rng.randrange(16, 1200))
    return body + hashlib.sha256(body).digest()[:_DIGEST]


def check(datagram: bytes) -> int | None:
    """
    The number of an intact datagram; L{None} for a damaged one.
    """
    body, digest = datagram[:-_DIGEST], datagram[-_DIGEST:]
    if len(body) < _SEQ.size or hashlib.sha256(body).digest()[:_DIGEST] != digest:
        return None
    return int(_SEQ.unpack_from(body)[0])


def checksum_run(port: int, count: int) -> tuple[int, int, int]:
    """
    Send C{count} checked datagrams to the echo service behind C{port},
    at most L{WINDOW} unanswered at once; C{(answered, lost, damaged)}.
    """
    rng = random.Random(19)
    answered = lost = damaged = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(ANSWER_TIMEOUT)
        for start in range(0, count, WINDOW):
            waiting = set(range(start, min(start + WINDOW, count)))
            for seq in sorted(waiting):
                sock.sendto(checked_datagram(seq, rng), ("127.0.0.1", port))
            while waiting:
                try:
                    data = sock.recv(65535)
                except TimeoutError:
                    break
                seq = check(data)
                if seq is None:
                    damaged += 1
                elif seq in waiting:
                    waiting.discard(seq)
                    answered += 1
            lost += len(waiting)
    return answered, lost, damaged


def udp_service(stack: Stack, mode: str) -> int:
    """
    Start the UDP service in C{mode} on C{stack}; its port.
    """
    port_file = stack.tmp / f"udp-{mode}.port"
    stack.start([sys.executable, "-m", "tests.integration.udp_service",
                 "--port-file", str(port_file), "--mode", mode], f"udp {mode}")
    return int(wait_for_file(port_file))


def free_udp_port() -> int:
    """
    A UDP port of 127.0.0.1 that was free a moment ago.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answered_during_flood(case: SynchronousTestCase, port: int, count: int = 50) -> int:
    """
    Flood UDP C{port} from one socket (never reading its answers) while
    another sends C{count} datagrams, one at a time, each retried up to 5
    times after a silent L{ANSWER_TIMEOUT}; how many of those were answered.
    """
    stop, flooding = threading.Event(), threading.Event()
    sent = [0]

    def flood() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            payload = os.urandom(1200)
            while not stop.is_set():
                sock.sendto(payload, ("127.0.0.1", port))
                sent[0] += 1
                if sent[0] == 1000:
                    flooding.set()

    flooder = threading.Thread(target=flood)
    flooder.start()
    case.addCleanup(flooder.join)
    case.addCleanup(stop.set)
    case.assertTrue(flooding.wait(30), "the flood never got under way")
    answered = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(ANSWER_TIMEOUT)
        for i in range(count):
            message = b"other %d" % i
            for _ in range(5):
                sock.sendto(message, ("127.0.0.1", port))
                try:
                    if sock.recv(65535) == message:
                        answered += 1
                        break
                except TimeoutError:
                    continue
    stop.set()
    return answered


class UDPTests(StackTestCase):
    """
    C{nfltr udp} and C{nfltr udp-connect} carry datagrams both ways.
    """

    def udp_service(self, mode: str) -> int:
        """
        Start the UDP service in C{mode}; its port.
        """
        return udp_service(self.stack, mode)

    def through(self, mode: str) -> int:
        """
        A UDP service in C{mode} shared by an agent and reached through a
        udp-connect: the local port to send to.
        """
        key = self.stack.key("alice")
        service = self.udp_service(mode)
        agent = self.stack.start(
            nfltr("udp", str(service), "--name", "udpagent", "--state-dir",
                  str(self.stack.tmp / "agent"), *self.stack.relay_args()),
            "udp agent", {"NFLTR_KEY": key},
        )
        agent.wait_for(r"nfltr udp-connect udpagent")
        client = self.stack.start(
            nfltr("udp-connect", "udpagent", str(service), "--listen", "127.0.0.1:0",
                  *self.stack.relay_args()),
            "udp-connect", {"NFLTR_KEY": key},
        )
        return int(client.wait_for(r"listening on [\d.]+:(\d+) \(UDP\)").group(1))

    def test_dns(self) -> None:
        """
        A DNS server (Twisted Names) answers through udp-connect: the
        record asked for, and NXDOMAIN for a name it does not know.
        """
        local = self.through("dns")
        answer = dns_query(local, NAME)
        self.assertEqual([a.payload.dottedQuad() for a in answer.answers], [ADDRESS])
        self.assertEqual(dns_query(local, "missing.nfltr.test").rCode, dns.ENAME)

    def test_tenThousandChecked(self) -> None:
        """
        10,000 datagrams with a checksum each, sent at a modest rate (a
        window of L{WINDOW}), come back intact; loss is counted and, on
        loopback, nil.
        """
        local = self.through("echo")
        answered, lost, damaged = checksum_run(local, 10_000)
        self.assertEqual((answered, lost, damaged), (10_000, 0, 0),
                         f"answered {answered}, lost {lost}, damaged {damaged}")

    def test_floodDoesNotStopOthers(self) -> None:
        """
        While one visitor floods the udp-connect socket (never reading its
        answers), another visitor's datagrams are still answered, every one
        of them (each retried after a silent L{ANSWER_TIMEOUT}, as a UDP
        client would).
        """
        self.assertEqual(answered_during_flood(self, self.through("echo")), 50)


class PublicUDPTests(SynchronousTestCase):
    """
    A relay with a public UDP port: visitors send to it straight.
    """

    def setUp(self) -> None:
        self.public = free_udp_port()
        self.stack = Stack(
            Path(self.mktemp()).absolute(),
            relay_extra=("--public-ports", str(self.public), "--public-ports-interface",
                         "127.0.0.1"),
        )
        self.addCleanup(self.stack.close)

    def test_dns(self) -> None:
        """
        A DNS server shared with C{nfltr udp 53 --public-port N} answers
        queries sent to the relay's port N, with no connector.
        """
        key = self.stack.key("alice")
        service = udp_service(self.stack, "dns")
        agent = self.stack.start(
            nfltr("udp", str(service), "--public-port", str(self.public), "--name", "dns",
                  "--state-dir", str(self.stack.tmp / "agent"), *self.stack.relay_args()),
            "udp agent", {"NFLTR_KEY": key},
        )
        agent.wait_for(rf"public UDP port 127\.0\.0\.1:{self.public} -> UDP port {service}")
        answer = dns_query(self.public, NAME)
        self.assertEqual([a.payload.dottedQuad() for a in answer.answers], [ADDRESS])

    def test_floodDoesNotStopOthers(self) -> None:
        """
        While one visitor floods the public UDP port, another visitor's
        datagrams are still answered, every one of them (retried as a UDP
        client would).
        """
        key = self.stack.key("alice")
        service = udp_service(self.stack, "echo")
        agent = self.stack.start(
            nfltr("udp", str(service), "--public-port", str(self.public), "--name", "echo",
                  "--state-dir", str(self.stack.tmp / "agent"), *self.stack.relay_args()),
            "udp agent", {"NFLTR_KEY": key},
        )
        agent.wait_for(rf"public UDP port 127\.0\.0\.1:{self.public} ")
        self.assertEqual(answered_during_flood(self, self.public), 50)
