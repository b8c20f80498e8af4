"""
Faults, with real processes: a relay killed (SIGKILL) mid-download and
mid-upload, then restarted on the same address and data directory; a relay
stopped (SIGTERM) while downloads are in flight, restarted after its drain
or while it still drains; a relay paused (SIGSTOP) past the keepalive bound;
an agent stopped (SIGTERM) while serving a download.  The tests print the
times a user would feel (restart to first request, time to find a dead
relay).

Waits are bounded and poll for what they wait for.  The only sleeps are the
pace of the slow visitors (a visitor reading at a given rate, so that a
drain must last longer than a few seconds) and the short pause between two
polls.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from nfltr.link import PRESETS

from .harness import Process, Stack, StackTestCase, exchange, nfltr
from .service import pattern

KiB = 1024
MiB = 1024 * KiB
# Generous bounds: what must happen well before them did not happen at all.
RECOVERY_TIMEOUT = 30.0
EXIT_TIMEOUT = 30.0
# A drained process exits once its sessions are done: well before the
# 30 s drain timeout.
DRAINED_EXIT_TIMEOUT = 10.0
POLL = 0.05
# A visitor's receive buffer: small, so that little of a download can sit
# past the relay, in the kernel, while the visitor does not read.
SMALL_RCVBUF = 64 * KiB
MARKER = "fault-tolerant"
FAST = PRESETS["fast"]


class Visitor:
    """
    One download of C{size} pattern bytes through a local port, read under
    the test's control.

    @ivar got: the bytes received so far.
    @ivar error: what ended the download with an error, if anything did.
    @ivar eof: the download ended with a clean end of stream.
    """

    def __init__(self, port: int, size: int, seed: int, timeout: float = RECOVERY_TIMEOUT) -> None:
        self.size, self.seed = size, seed
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_RCVBUF)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(f"DOWNLOAD {size} {seed}\n".encode())
        self.got = bytearray()
        self.error: OSError | None = None
        self.eof = False

    def _recv(self) -> bool:
        try:
            data = self.sock.recv(256 * KiB)
        except OSError as e:
            self.error = e
            return False
        if not data:
            self.eof = True
            return False
        self.got += data
        return True

    def read_until(self, n: int) -> None:
        """
        Read until at least C{n} bytes came (or the download ended).
        """
        while len(self.got) < n and self._recv():
            pass

    def read_all(self, rate: float | None = None) -> None:
        """
        Read to the end (EOF or error), at most C{rate} bytes a second if
        given: a slow visitor.
        """
        start, base = time.monotonic(), len(self.got)
        while self._recv():
            if rate is not None:
                ahead = (len(self.got) - base) / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)  # the visitor's pace, not a synchronisation
        self.sock.close()

    def intact(self) -> bool:
        """
        Every byte came, in order, and the download ended cleanly.
        """
        return self.eof and self.error is None and bytes(self.got) == pattern(self.seed, self.size)

    def describe(self) -> str:
        """
        How the download ended, for failure messages.
        """
        end = "clean EOF" if self.eof else f"error {self.error!r}"
        return f"seed {self.seed}: {len(self.got)} of {self.size} bytes, then {end}"


class Sink:
    """
    A service in this process that reads the first connection that
    carries bytes to the end, recording how it ended (the agent's side of
    an upload).  A connection closed cleanly before any byte is the
    connector's check at start (its probe session), and is skipped.

    @ivar received: how many bytes came.
    @ivar eof: the connection ended with a clean end of stream.
    @ivar error: the error that ended it, if one did.
    """

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(RECOVERY_TIMEOUT)
        self.port = self.listener.getsockname()[1]
        self.received = 0
        self.eof = False
        self.error: OSError | None = None
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            while not self.received:
                conn, _ = self.listener.accept()
                with conn:
                    conn.settimeout(RECOVERY_TIMEOUT)
                    while data := conn.recv(256 * KiB):
                        self.received += len(data)
            self.eof = True
        except OSError as e:
            self.error = e
        finally:
            self.done.set()

    def close(self) -> None:
        """
        Stop listening.
        """
        self.listener.close()


class Uploader:
    """
    A visitor that sends pattern bytes through a local port until the
    connection fails, in a thread.

    @ivar error: the error that stopped it.
    """

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=RECOVERY_TIMEOUT)
        self.error: OSError | None = None
        self.thread = threading.Thread(target=self._send, daemon=True)
        self.thread.start()

    def _send(self) -> None:
        chunk = pattern(0, 256 * KiB)
        try:
            while True:
                self.sock.sendall(chunk)
        except OSError as e:
            self.error = e
        finally:
            self.sock.close()


def marker(port: int) -> bool:
    """
    Whether a MARKER request through C{port} gets its answer.
    """
    try:
        answer = exchange(port, f"MARKER {MARKER}\n".encode(), timeout=RECOVERY_TIMEOUT)
    except OSError:
        return False
    return answer == f"{MARKER}\n".encode()


def poll_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """
    Poll C{condition} until it holds; when it did (C{time.monotonic()}).

    @raise AssertionError: it did not hold within C{timeout} seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g}s")
        time.sleep(POLL)


def first_lines(processes: Sequence[Process], pattern_: str, timeout: float) -> list[float]:
    """
    When (C{time.monotonic()}, to a poll's precision) each process first
    printed a line containing C{pattern_}, polling all of them together.
    """
    seen: dict[int, float] = {}

    def all_seen() -> bool:
        now = time.monotonic()
        for i, process in enumerate(processes):
            if i not in seen and any(pattern_ in line for line in list(process.lines)):
                seen[i] = now
        return len(seen) == len(processes)

    poll_until(all_seen, timeout, f"a line with {pattern_!r} from each of "
               + ", ".join(p.name for p in processes))
    return [seen[i] for i in range(len(processes))]


def port_of(address: str) -> int:
    """
    The port of C{HOST:PORT}.
    """
    return int(address.rsplit(":", 1)[1])


def restart_relay(stack: Stack) -> tuple[float, float]:
    """
    Start a relay again (with C{stack}'s relay command, if any) on C{stack}'s first one's data
    directory, TLS port, admin port and HTTP port; when it was started and when it listened.
    """
    relay = [
        "relay", "--data-dir", str(stack.data),
        "--tls", f"tcp:{port_of(stack.info['tls'])}:interface=127.0.0.1",
        "--admin", f"tcp:{port_of(stack.info['admin'])}:interface=127.0.0.1",
        "--http", f"tcp:{port_of(stack.info['http'])}:interface=127.0.0.1",
    ]
    args = stack.relay_command + relay if stack.relay_command else nfltr(*relay)
    started = time.monotonic()
    relay = Process(args, name="relay (restarted)")
    stack.processes.insert(0, relay)  # stopped last
    stack.relay = relay
    relay.wait_for(r"relay listening")
    return started, time.monotonic()


class FaultTests(StackTestCase):
    """
    What users see when the relay or the agent fails or stops.  Written
    once, run per transport (L{transport}: the agents' and connectors'
    options; the raw link here, WebSocket in L{FaultTestsOverWebSocket}).
    """

    transport: tuple[str, ...] = ("--transport", "link")

    def tunnel(self, *extra: str, service: int | None = None) -> None:
        """
        An agent sharing a service (default: a new test service) and a
        connector to it, both with C{extra} options.
        """
        key = self.stack.key("alice")
        if service is None:
            service = self.stack.service()
        # Without resumption (docs/link-protocol.md section 18): what a session does when
        # its link is lost and nothing resumes it. tests.integration.test_resume: with it.
        extra = (*self.transport, "--resume-timeout", "0", *extra)
        self.agent, pin = self.stack.agent(key, "web", service, *extra)
        assert pin is not None
        self.client, self.local = self.stack.connector(
            key, "web", service, "--pin", pin, *extra
        )

    def kill(self, process: Process, signum: int) -> None:
        """
        Send C{signum} to C{process}; a paused process is resumed at cleanup.
        """
        os.kill(process.popen.pid, signum)
        if signum == signal.SIGSTOP:
            self.addCleanup(lambda: process.popen.poll() is None and os.kill(
                process.popen.pid, signal.SIGCONT))

    def restart_relay(self) -> tuple[float, float]:
        """
        Start a relay again on the first one's data directory, TLS port and
        admin port; when it was started and when it listened.
        """
        return restart_relay(self.stack)

    def visitor(self, size: int, seed: int) -> Visitor:
        """
        A L{Visitor} downloading through the connector, closed at cleanup.
        """
        visitor = Visitor(self.local, size, seed)
        self.addCleanup(visitor.sock.close)
        return visitor

    def recovered(self, what: str) -> float:
        """
        Poll a request through the connector until one succeeds; when.
        """
        return poll_until(lambda: marker(self.local), RECOVERY_TIMEOUT, what)

    def test_relayKilledMidTransfer(self) -> None:
        """
        A relay killed with SIGKILL during a download cuts it with an error
        (fewer bytes, then a connection error; never a clean EOF after a
        short body).  Restarted on the same address and data directory, the
        relay gets its agent and connector back without help, and a request
        through them succeeds; the time from the restart to that request is
        printed.
        """
        self.tunnel()
        size = 64 * MiB
        visitor = self.visitor(size, 1)
        visitor.read_until(MiB)
        self.kill(self.stack.relay, signal.SIGKILL)
        self.stack.relay.wait_exit(EXIT_TIMEOUT)
        visitor.read_all()
        self.assertLess(len(visitor.got), size, visitor.describe())
        self.assertFalse(visitor.eof, f"a cut looked like a clean end: {visitor.describe()}")
        self.assertIsInstance(visitor.error, ConnectionError, visitor.describe())
        self.assertEqual(bytes(visitor.got), pattern(1, size)[:len(visitor.got)])

        started, listening = self.restart_relay()
        done = self.recovered("a request after the relay's restart")
        print(
            f"\nrelay SIGKILL + restart: start to listening {listening - started:.3f}s, "
            f"listening to first request {done - listening:.3f}s, "
            f"start to first request {done - started:.3f}s"
        )

    def test_relayKilledMidUpload(self) -> None:
        """
        A relay killed with SIGKILL during an upload cuts it with an error at
        both ends: the service sees some bytes, then a connection error
        (never a clean end of stream after a short body), and the visitor's
        sending fails.
        """
        sink = Sink()
        self.addCleanup(sink.close)
        self.tunnel(service=sink.port)
        uploader = Uploader(self.local)
        poll_until(lambda: sink.received >= MiB or sink.done.is_set(), RECOVERY_TIMEOUT,
                   "the first MiB of the upload at the service")
        self.kill(self.stack.relay, signal.SIGKILL)
        self.assertTrue(sink.done.wait(RECOVERY_TIMEOUT), "the service's connection never ended")
        uploader.thread.join(RECOVERY_TIMEOUT)
        self.assertFalse(sink.eof, f"a clean end of stream after {sink.received} bytes")
        self.assertIsInstance(sink.error, ConnectionError)
        self.assertIsInstance(uploader.error, ConnectionError)

    def test_relaySigtermDrains(self) -> None:
        """
        SIGTERM on the relay drains: 8 downloads in flight, read by slow
        visitors for several seconds after the relay's GOAWAY, all finish
        complete and intact; the relay then exits 0 on its own, soon (not
        at the drain timeout), and once it is restarted new sessions
        succeed.
        """
        self.tunnel()
        size, rate = 6 * MiB, 1.5 * MiB
        visitors = [self.visitor(size, seed) for seed in range(8)]
        for visitor in visitors:
            visitor.read_until(256 * KiB)
        self.kill(self.stack.relay, signal.SIGTERM)
        first_lines([self.agent, self.client], "the peer is going away", RECOVERY_TIMEOUT)
        with ThreadPoolExecutor(len(visitors)) as pool:
            list(pool.map(lambda v: v.read_all(rate), visitors))
        self.assertEqual(
            [v.describe() for v in visitors if not v.intact()], [], "downloads cut by the drain"
        )
        self.assertEqual(self.stack.relay.wait_exit(DRAINED_EXIT_TIMEOUT), 0)

        started, listening = self.restart_relay()
        done = self.recovered("a request after the drained relay's restart")
        print(
            f"\nrelay SIGTERM (drained) + restart: start to listening {listening - started:.3f}s,"
            f" listening to first request {done - listening:.3f}s"
        )

    def test_relayReplacedWhileDraining(self) -> None:
        """
        A relay restarted on the same address while the old one still
        drains (a rolling restart): the agent and the connector take the
        GOAWAY as a cue to dial again at once, so a new request succeeds
        through the new relay while the old one is still carrying a
        download, which then finishes intact; the old relay exits 0.
        """
        self.tunnel()
        old = self.stack.relay
        size = 8 * MiB
        visitor = self.visitor(size, 5)
        visitor.read_until(256 * KiB)  # then holds: the old relay cannot finish its drain
        self.kill(old, signal.SIGTERM)
        first_lines([self.agent, self.client], "the peer is going away", RECOVERY_TIMEOUT)
        started, listening = self.restart_relay()
        done = self.recovered("a request through the new relay while the old one drains")
        self.assertIsNone(old.popen.poll(), "the old relay did not wait for its download")
        print(
            f"\nrelay replaced while draining: start to listening {listening - started:.3f}s, "
            f"listening to first request {done - listening:.3f}s"
        )
        visitor.read_all()
        self.assertTrue(visitor.intact(), visitor.describe())
        self.assertEqual(old.wait_exit(DRAINED_EXIT_TIMEOUT), 0)

    def test_pausedRelayDetectedDead(self) -> None:
        """
        With C{--keepalive fast}, an agent and a connector find a relay
        paused with SIGSTOP dead within the preset's bound (interval +
        timeout, measured from the pause; not sooner than the timeout, so
        it is the keepalive that found it), each saying so in its log;
        after SIGCONT they are back and a request succeeds.
        """
        self.tunnel("--keepalive", "fast")
        bound = FAST.interval + FAST.timeout
        paused = time.monotonic()
        self.kill(self.stack.relay, signal.SIGSTOP)
        found = first_lines([self.agent, self.client], "is dead", bound + RECOVERY_TIMEOUT)
        delays = [when - paused for when in found]
        self.kill(self.stack.relay, signal.SIGCONT)
        resumed = time.monotonic()
        done = self.recovered("a request after SIGCONT")
        print(
            f"\nrelay SIGSTOP: found dead by the agent after {delays[0]:.2f}s, by the connector "
            f"after {delays[1]:.2f}s (bound {bound:g}s); SIGCONT to first request "
            f"{done - resumed:.3f}s"
        )
        for delay in delays:
            self.assertLessEqual(delay, bound + 1.0)
            self.assertGreaterEqual(delay, FAST.timeout - 0.5)

    def test_agentSigtermDrains(self) -> None:
        """
        SIGTERM on the agent drains: a download in flight, read by a slow
        visitor for seconds after the agent began draining, finishes
        complete and intact, and the agent then exits 0 on its own, soon
        (not at the drain timeout).
        """
        self.tunnel()
        size, rate = 8 * MiB, 2 * MiB
        visitor = self.visitor(size, 3)
        visitor.read_until(256 * KiB)
        self.kill(self.agent, signal.SIGTERM)
        self.agent.wait_for(r"draining [12] sessions?")  # the probe session may still be ending
        visitor.read_all(rate)
        self.assertTrue(visitor.intact(), visitor.describe())
        self.assertEqual(self.agent.wait_exit(DRAINED_EXIT_TIMEOUT), 0)


class FaultTestsOverWebSocket(FaultTests):
    """
    The same, with agents and connectors on the WebSocket transport.
    """

    transport = ("--transport", "websocket")
