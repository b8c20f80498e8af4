"""
A blocking control-port client for the tests' private Tor network
(L{tests.tor_network}): enough to wait for a bootstrap without a fixed sleep.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Protocol

#: Seconds one control-port reply may take.
CONTROL_TIMEOUT = 10.0
LOOPBACK = "127.0.0.1"


class TorNetworkError(Exception):
    """
    The private network did not come up; the message says which node and ends with its log.
    """


class Watched(Protocol):
    """
    A tor process whose exit ends a wait.
    """

    def check_alive(self) -> None:
        """
        @raise TorNetworkError: it exited.
        """

    def log_tail(self, lines: int = 30) -> str:
        """
        The end of its log.
        """


class Controller:
    """
    A blocking control-port connection, for the tests' waits only (the relay and agents
    use txtorcon): cookie authentication, C{GETINFO}, asynchronous events as wake-ups.
    """

    def __init__(self, port: int, cookie: Path, watched: list[Watched]) -> None:
        self.watched = watched
        self.sock = socket.create_connection((LOOPBACK, port), timeout=CONTROL_TIMEOUT)
        self.buffer = bytearray()
        self.events = 0
        self.command(f"AUTHENTICATE {cookie.read_bytes().hex()}")

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def command(self, line: str) -> list[str]:
        """
        Send C{line}; the reply's lines (events that come meanwhile are counted).

        @raise TorNetworkError: an error reply.
        """
        self.sock.sendall(line.encode() + b"\r\n")
        lines = []
        while True:
            reply = self._line()
            if reply.startswith("650"):
                self._skip_event(reply)
                continue
            if reply[3:4] == "+":
                lines.append(reply[4:])
                lines.extend(self._data())
            else:
                lines.append(reply[4:])
            if reply[3:4] == " ":
                if not reply.startswith("25"):  # 250 OK, 251 and 252: OK with a note
                    raise TorNetworkError(f"tor answered {line.split(maxsplit=1)[0]}: {reply}")
                return lines

    def getinfo(self, key: str) -> str:
        """
        One C{GETINFO} value (multi-line values joined by newlines).
        """
        lines = self.command(f"GETINFO {key}")
        first = lines[0].split("=", 1)[1] if "=" in lines[0] else ""
        return "\n".join([first, *lines[1:-1]]).strip()

    def wait_bootstrapped(self, deadline: float, routers: int) -> None:
        """
        Wait until tor bootstrapped to 100 % on a consensus listing C{routers} routers, each
        with the HSDir flag; each new consensus or status event wakes the check up.

        @raise TorNetworkError: a watched tor exited, or C{deadline} passed.
        """
        self.command("SETEVENTS STATUS_CLIENT NEWCONSENSUS")
        while True:
            phase = self.getinfo("status/bootstrap-phase")
            if "PROGRESS=100" in phase and self._hsdirs() >= routers:
                return
            self._await_event(deadline, phase)

    def _hsdirs(self) -> int:
        listing = self.getinfo("ns/all")
        return sum(1 for line in listing.splitlines()
                   if line.startswith("s ") and "HSDir" in line.split())

    def _await_event(self, deadline: float, phase: str) -> None:
        while True:
            for node in self.watched:
                node.check_alive()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TorNetworkError(
                    f"no consensus with every router in time; last status: {phase}\n"
                    f"{self.watched[0].log_tail()}"
                )
            # Woken by the next event, or after a second to check that the tors still run.
            self.sock.settimeout(min(left, 1.0))
            try:
                line = self._line()
            except TimeoutError:
                continue
            finally:
                self.sock.settimeout(CONTROL_TIMEOUT)
            if line.startswith("650"):
                self._skip_event(line)
                return

    def _skip_event(self, line: str) -> None:
        if line[3:4] == "+":
            self._data()
            while not self._line().startswith("650 "):
                pass
        elif line[3:4] == "-":
            while not self._line().startswith("650 "):
                pass

    def _data(self) -> list[str]:
        lines = []
        while (line := self._line()) != ".":
            lines.append(line[1:] if line.startswith("..") else line)
        return lines

    def _line(self) -> str:
        """
        The next line (a timeout leaves what was read in the buffer).
        """
        while (end := self.buffer.find(b"\n")) < 0:
            data = self.sock.recv(65536)
            if not data:
                raise TorNetworkError("tor closed its control connection")
            self.buffer += data
        raw = bytes(self.buffer[: end + 1])
        del self.buffer[: end + 1]
        return raw.decode("utf-8", "replace").rstrip("\r\n")
