# -*- test-case-name: tests.bench.test_soak -*-
"""
The soak's visitors (L{bench.soak}): one visit checks one path end to end
with a payload it verifies (an echo of random bytes over a TCP tunnel, a
download of the web service's pattern or the sha256 of an upload through a
share URL, an echo over C{ssh -W}), and a L{Visitors} thread per path
repeats it at a steady pace, recording every visit as a L{Visit}.
"""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.integration.web_service import pattern as web_pattern

#: The bytes one visit sends or fetches.
PAYLOAD = 16 * 1024
#: The largest HTTP head a share visit reads.
MAX_HEAD = 64 * 1024

#: A visit: raises (OSError, ValueError, ...) when the path failed.
VisitFunction = Callable[[float], None]


@dataclass(frozen=True)
class Visit:
    """
    One visit of C{path}: when it started and ended (monotonic seconds from
    the soak's start) and why it failed (empty when it did not).
    """

    path: str
    start: float
    end: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while data := sock.recv(256 * 1024):
        chunks.append(data)
    return b"".join(chunks)


def tcp_echo(port: int) -> VisitFunction:
    """
    A visit through the connector on 127.0.0.1:C{port} to the test service
    (L{tests.integration.service}): random bytes echoed back intact.
    """

    def visit(timeout: float) -> None:
        payload = os.urandom(PAYLOAD)
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"ECHO\n" + payload)
            sock.shutdown(socket.SHUT_WR)
            got = read_all(sock)
        if got != payload:
            raise ValueError(f"echo: {len(got)} bytes back of {len(payload)}, or changed")

    return visit


def share_visit(port: int, hosts: list[str], ca: str, check_hostname: bool) -> VisitFunction:
    """
    Visits of the share URLs C{hosts} (in turn) through the TLS port
    127.0.0.1:C{port}: a download of the pattern and an upload whose sha256
    the service answers, alternately.
    """
    context = ssl.create_default_context(cafile=ca)
    context.check_hostname = check_hostname
    turn = [0]

    def visit(timeout: float) -> None:
        turn[0] += 1
        host = hosts[turn[0] % len(hosts)]
        if turn[0] % 2:
            body = b""
            request = f"GET /bytes/{PAYLOAD} HTTP/1.1\r\n".encode()
            expected = web_pattern(PAYLOAD)
        else:
            body = os.urandom(PAYLOAD)
            request = f"POST /sha256 HTTP/1.1\r\nContent-Length: {len(body)}\r\n".encode()
            expected = hashlib.sha256(body).hexdigest().encode()
        request += f"Host: {host}\r\nConnection: close\r\n\r\n".encode() + body
        with (socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw,
              context.wrap_socket(raw, server_hostname=host) as sock):
            sock.sendall(request)
            answer = read_all(sock)
        head, _, got = answer.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].decode(errors="replace")
        if " 200 " not in status + " ":
            raise ValueError(f"{host}: {status or 'no answer'}")
        if got != expected:
            raise ValueError(f"{host}: {len(got)} bytes of body, not the expected")

    return visit


def ssh_w(args: list[str]) -> VisitFunction:
    """
    A visit with C{ssh ... -W AGENT:PORT} (C{args}): random bytes echoed
    back by the test service.
    """

    def visit(timeout: float) -> None:
        payload = os.urandom(PAYLOAD).hex().encode()
        try:
            done = subprocess.run(args, input=b"ECHO\n" + payload, capture_output=True,
                                  timeout=timeout, check=False, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise TimeoutError("ssh -W timed out") from None
        if done.stdout != payload:
            last = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
            raise ValueError(f"ssh -W: exit {done.returncode}, {len(done.stdout)} bytes back "
                             f"{' '.join(last)}".strip())

    return visit


def describe(error: BaseException) -> str:
    """
    A short description of why a visit failed.
    """
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:200]


class Visitors:
    """
    A thread per path, each visiting its path every C{pace} seconds (a
    visit taking longer delays the next) until L{stop}.

    @ivar visits: every L{Visit} so far, in the order they ended.
    """

    def __init__(
        self, paths: dict[str, VisitFunction], origin: float, pace: float, timeout: float,
    ) -> None:
        self.paths = paths
        self.origin = origin
        self.pace = pace
        self.timeout = timeout
        self.visits: list[Visit] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(name, visit), daemon=True)
                         for name, visit in paths.items()]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def now(self) -> float:
        return time.monotonic() - self.origin

    def _run(self, name: str, visit: VisitFunction) -> None:
        while not self._stop.is_set():
            start = self.now()
            error = ""
            try:
                visit(self.timeout)
            except (OSError, ValueError, ssl.SSLError) as e:
                error = describe(e)
            end = self.now()
            self.visits.append(Visit(name, start, end, error))
            self._stop.wait(max(0.0, self.pace - (end - start)))

    def halt(self) -> None:
        """
        Start no more visits.
        """
        self._stop.set()

    def stop(self) -> None:
        """
        Start no more visits, and wait for those under way.
        """
        self._stop.set()
        for thread in self._threads:
            thread.join(self.timeout + 5)
