"""
Resumable sessions with real processes (docs/link-protocol.md section 18): transfers both ways
through tcp-connect, sha256-verified, while the relay is killed (SIGKILL) and started again on
the same port; every transfer completes byte-exact, and no local connection sees a reset.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import threading

from twisted.trial.unittest import SynchronousTestCase

from .harness import Process, StackTestCase, exchange
from .test_faults import RECOVERY_TIMEOUT, first_lines, poll_until, restart_relay

KiB = 1024
MiB = 1024 * KiB
# The figure: 8 transfers of 64 MiB each way survive the relay's death.
TRANSFERS = 8
SIZE = 64 * MiB
# The tests where every visitor's connection is reset need no more than a few transfers.
RESET_TRANSFERS = 4
RESET_SIZE = 16 * MiB
CHUNK = 64 * KiB
# A transfer must finish well within this, relay restart included.
TRANSFER_TIMEOUT = 120.0


class EchoTransfer:
    """
    One connection through the connector to the echo service: C{size} random bytes sent
    while the echo is read back, the digests compared at the end.  The second half is sent
    once C{gate} is set.

    @ivar sent: bytes sent so far.  @ivar got: bytes received so far.
    @ivar error: the first error that ended either direction, if any.
    @ivar eof: the echo ended with a clean end of stream.
    """

    def __init__(self, port: int, size: int, gate: threading.Event) -> None:
        self.size = size
        self.gate = gate
        self.data = os.urandom(size)
        self.sent = self.got = 0
        self.error: BaseException | None = None
        self.eof = False
        self.digest = hashlib.sha256()
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(TRANSFER_TIMEOUT)
        self.sock.sendall(b"ECHO\n")
        self.threads = [threading.Thread(target=self._send, daemon=True),
                        threading.Thread(target=self._receive, daemon=True)]
        for thread in self.threads:
            thread.start()

    def _send(self) -> None:
        try:
            view = memoryview(self.data)
            while self.sent < self.size // 2:
                self.sent += self.sock.send(view[self.sent:self.size // 2])
            self.gate.wait(TRANSFER_TIMEOUT)
            while self.sent < self.size:
                self.sent += self.sock.send(view[self.sent:self.sent + CHUNK])
            self.sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            self.error = self.error or e

    def _receive(self) -> None:
        try:
            while True:
                data = self.sock.recv(CHUNK)
                if not data:
                    self.eof = True
                    return
                self.digest.update(data)
                self.got += len(data)
        except OSError as e:
            self.error = self.error or e

    def join(self) -> None:
        for thread in self.threads:
            thread.join(TRANSFER_TIMEOUT)
        self.sock.close()

    def exact(self) -> bool:
        return self.got == self.size and self.digest.digest() == hashlib.sha256(self.data).digest()

    def describe(self) -> str:
        return (f"sent {self.sent}, got {self.got} of {self.size}, eof {self.eof}, "
                f"error {self.error}")


def assert_all_exact(case: SynchronousTestCase, transfers: list[EchoTransfer],
                     ends: list[Process]) -> None:
    """
    Every transfer ended without an error, with a clean end of stream, byte-exact (sha256);
    on a failure, the last lines of the C{ends} (the connector and the agent) are printed.
    """
    for transfer in transfers:
        transfer.join()
    for transfer in transfers:
        if transfer.error is not None:  # what the two ends said, for the failure
            print("\n".join(line for end in ends for line in list(end.lines)[-30:]))
        case.assertIsNone(transfer.error, transfer.describe())
        case.assertTrue(transfer.eof, transfer.describe())
        case.assertTrue(transfer.exact(), transfer.describe())


class ResumeTests(StackTestCase):
    """
    Sessions through tcp-connect outlive the relay between them.
    """

    transport: tuple[str, ...] = ("--transport", "link")

    def tunnel(self, *extra: str) -> None:
        """
        An agent sharing an echo service and a connector to it, both with C{extra} options.
        """
        self.key = key = self.stack.key("alice")
        self.service = service = self.stack.service()
        extra = (*self.transport, *extra)
        self.agent, pin = self.stack.agent(key, "web", service, *extra)
        assert pin is not None
        self.client, self.local = self.stack.connector(key, "web", service, "--pin", pin,
                                                       *extra)

    def signal(self, signum: int) -> None:
        """
        Send C{signum} to the relay; a paused relay is resumed at cleanup.
        """
        relay = self.stack.relay
        os.kill(relay.popen.pid, signum)
        if signum == signal.SIGSTOP:
            self.addCleanup(lambda: relay.popen.poll() is None and os.kill(
                relay.popen.pid, signal.SIGCONT))

    def transfers(self, release: bool = True, count: int = TRANSFERS,
                  size: int = SIZE) -> list[EchoTransfer]:
        """
        C{count} echo transfers of C{size} bytes, each with half its bytes echoed and (if
        C{release}) the rest on its way.
        """
        gate = threading.Event()
        transfers = [EchoTransfer(self.local, size, gate) for _ in range(count)]
        for transfer in transfers:
            self.addCleanup(transfer.sock.close)
        poll_until(lambda: all(t.got >= size // 2 for t in transfers), RECOVERY_TIMEOUT,
                   "the first half of every echo")
        if release:
            gate.set()
        return transfers

    def assertAllExact(self, transfers: list[EchoTransfer]) -> None:
        assert_all_exact(self, transfers, [self.client, self.agent])

    def test_relayKilled(self) -> None:
        """
        8 echo transfers of 64 MiB each way; the relay is killed with SIGKILL in the middle
        and started again on the same port: every transfer completes byte-exact (sha256),
        ending with a clean end of stream, and no connection sees a reset.
        """
        self.tunnel()
        transfers = self.transfers()
        self.signal(signal.SIGKILL)
        cut = [t.got for t in transfers]
        self.assertTrue(all(got < SIZE for got in cut), f"done before the kill: {cut}")
        self.stack.relay.wait_exit(RECOVERY_TIMEOUT)
        restart_relay(self.stack)
        self.assertAllExact(transfers)
        print(f"\nbytes echoed when the relay was killed: {', '.join(map(str, cut))}")

    def test_relayPaused(self) -> None:
        """
        The same with the relay paused (SIGSTOP) until the agent and the connector found it
        dead (C{--keepalive fast}), then resumed (SIGCONT): every transfer completes byte-exact,
        with a clean end.
        """
        self.tunnel("--keepalive", "fast")
        transfers = self.transfers()
        self.signal(signal.SIGSTOP)
        first_lines([self.agent, self.client], "is dead", RECOVERY_TIMEOUT)
        self.signal(signal.SIGCONT)
        self.assertAllExact(transfers)

    def test_resumeTimeout(self) -> None:
        """
        A relay killed and not started again: once the resume timeout passed, each visitor's
        connection is reset (never a clean end of stream).  The visitors only read (a socket
        reports a reset once: to the reader here).
        """
        self.tunnel("--resume-timeout", "2")
        transfers = self.transfers(release=False, count=RESET_TRANSFERS, size=RESET_SIZE)
        self.signal(signal.SIGKILL)
        poll_until(lambda: not any(t.threads[1].is_alive() for t in transfers),
                   RECOVERY_TIMEOUT, "the end of every echo")
        for transfer in transfers:
            transfer.gate.set()
            transfer.join()
        for transfer in transfers:
            self.assertFalse(transfer.eof, transfer.describe())
            self.assertIsInstance(transfer.error, ConnectionResetError, transfer.describe())


    def test_agentKilled(self) -> None:
        """
        The agent killed (SIGKILL) and started again: its sessions died with it (their
        bytes and tokens were in its memory), so the connector's resumes are refused and each
        visitor's connection is reset, never a clean end; a new connection works through the
        new agent.
        """
        self.tunnel()
        transfers = self.transfers(release=False, count=RESET_TRANSFERS, size=RESET_SIZE)
        self.agent.popen.send_signal(signal.SIGKILL)
        self.agent.wait_exit(RECOVERY_TIMEOUT)
        self.stack.agent(self.key, "web", self.service, *self.transport)
        poll_until(lambda: not any(t.threads[1].is_alive() for t in transfers),
                   RECOVERY_TIMEOUT, "the end of every echo")
        for transfer in transfers:
            transfer.gate.set()
            transfer.join()
        for transfer in transfers:
            self.assertFalse(transfer.eof, transfer.describe())
            self.assertIsInstance(transfer.error, ConnectionResetError, transfer.describe())
        self.assertEqual(exchange(self.local, b"MARKER again\n"), b"again\n")

    def test_agentWithoutResume(self) -> None:
        """
        An agent without resumption (C{--resume-timeout 0}, as an older agent): the connector's
        check at start learns it, and its sessions are plain ones that work.
        """
        key = self.stack.key("alice")
        service = self.stack.service()
        _, pin = self.stack.agent(key, "web", service, *self.transport, "--resume-timeout", "0")
        assert pin is not None
        _, local = self.stack.connector(key, "web", service, "--pin", pin, *self.transport)
        self.assertEqual(exchange(local, b"MARKER plain\n"), b"plain\n")


class ResumeOverWebSocketTests(ResumeTests):
    """
    The same, with the agent and the connector on the WebSocket transport.
    """

    transport = ("--transport", "websocket")
