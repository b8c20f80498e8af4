"""
What becomes of the connections waiting in the accept queue of a relay
that stops, when relays share a port (C{reuseport:PORT}, docs/replicas.md
"One port for all of them"): with real relay processes in a network
namespace of the test's own (L{tests.integration.netns}), since
C{net.ipv4.tcp_migrate_req} is a setting of the namespace.

Each test runs the same steps, so the kernel alone decides the outcome:
relay 0 listens on the shared port and is stopped (SIGSTOP, waited for),
so it accepts nothing; the visitors connect (the kernel completes their
handshakes into relay 0's queue, the only listener) and send their TLS
ClientHello; relay 1 starts on the same port; relay 0 is killed
(SIGKILL, its exit waited for, by which time the kernel closed its
listener).  Then every visitor finishes its TLS handshake, or is reset.
Relay 1 starts only once the visitors wait, so none of them lands on it by
the port's hash: all wait at relay 0.  Relay 0 is killed rather than sent
SIGTERM: resumed with SIGTERM pending, it might accept some of them before
it closes its listener, and the outcome would no longer be the kernel's
alone.
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
from pathlib import Path

from twisted.trial.unittest import SkipTest, SynchronousTestCase

from .harness import Stack, nfltr
from .netns import NetworkNamespace

#: The shared port, in the test's own namespace (where nothing else listens).
PORT = 8443
#: Visitors waiting in relay 0's queue: far below the relays' listen backlog.
VISITORS = 8
#: How long a visitor waits for its handshake at most (a hang fails; nothing waits it out).
TIMEOUT = 60.0
#: The first Linux with C{net.ipv4.tcp_migrate_req}.
MIGRATE_REQ_SINCE = (5, 14)


def kernel_version() -> tuple[int, int]:
    """
    This kernel's major and minor version (C{uname -r}).
    """
    major, minor = os.uname().release.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


class QueuedVisitorsCase(SynchronousTestCase):
    """
    Two relays on one C{reuseport:} TLS port in a new network namespace with
    C{net.ipv4.tcp_migrate_req} set to L{migrateReq}.
    """

    #: The namespace's C{net.ipv4.tcp_migrate_req}.
    migrateReq = 0

    def setUp(self) -> None:
        if kernel_version() < MIGRATE_REQ_SINCE:
            raise SkipTest("net.ipv4.tcp_migrate_req needs Linux 5.14 or later; this is "
                           + os.uname().release)
        self.netns = NetworkNamespace(f"net.ipv4.tcp_migrate_req={self.migrateReq}")
        self.addCleanup(self.netns.close)
        self.tmp = Path(self.mktemp()).absolute()

    def relay(self, i: int) -> Stack:
        """
        Start relay C{i} on the shared port in the namespace (relay 1 with
        relay 0's CA, so a visitor trusts either).
        """
        if i > 0:
            source = self.tmp / "relay0" / "relay" / "tls"
            target = self.tmp / f"relay{i}" / "relay" / "tls"
            target.mkdir(parents=True)
            for name in ("ca.crt", "ca.key"):
                shutil.copy2(source / name, target / name)
        stack = Stack(self.tmp / f"relay{i}", self.netns.prefix() + nfltr(),
                      ("--tls", f"reuseport:{PORT}:interface=127.0.0.1"))
        self.addCleanup(stack.close)
        self.assertEqual(stack.address, f"127.0.0.1:{PORT}")
        return stack

    def queueAndKill(self) -> list[ssl.SSLSocket]:
        """
        The steps of the module docstring, up to relay 0's death; the
        visitors, each with its ClientHello sent and unanswered.
        """
        first = self.relay(0)
        pid = first.relay.popen.pid
        os.kill(pid, signal.SIGSTOP)
        _, status = os.waitpid(pid, os.WUNTRACED)
        self.assertTrue(os.WIFSTOPPED(status), f"relay 0 did not stop: status {status}")
        context = ssl.create_default_context(cafile=first.ca)
        visitors = []
        for raw in self.netns.sockets(VISITORS):
            self.addCleanup(raw.close)
            raw.settimeout(TIMEOUT)
            raw.connect(("127.0.0.1", PORT))
            tls = context.wrap_socket(raw, server_hostname="127.0.0.1",
                                      do_handshake_on_connect=False)
            tls.setblocking(False)
            with self.assertRaises(ssl.SSLWantReadError):
                tls.do_handshake()  # the ClientHello goes out; no answer yet
            tls.settimeout(TIMEOUT)
            visitors.append(tls)
        self.relay(1)
        os.killpg(pid, signal.SIGKILL)
        self.assertEqual(first.relay.popen.wait(TIMEOUT), -signal.SIGKILL)
        return visitors


class MigratedTests(QueuedVisitorsCase):
    """
    With C{net.ipv4.tcp_migrate_req=1}.
    """

    migrateReq = 1

    def test_queuedVisitorsServed(self) -> None:
        """
        The kernel moves the visitors waiting in the queue of the relay that
        died to the other relay's listener: each finishes its TLS handshake
        there, with the relays' certificate.
        """
        for tls in self.queueAndKill():
            tls.do_handshake()
            self.assertIsNotNone(tls.getpeercert())


class NotMigratedTests(QueuedVisitorsCase):
    """
    With C{net.ipv4.tcp_migrate_req=0}, the kernel's default.
    """

    def test_queuedVisitorsReset(self) -> None:
        """
        The kernel resets every visitor waiting in the queue of the relay that
        died, though another relay listens on the port.
        """
        for tls in self.queueAndKill():
            self.assertRaises(ConnectionResetError, tls.do_handshake)
