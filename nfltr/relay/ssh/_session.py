# -*- test-case-name: tests.relay.ssh.test_server -*-
"""
L{StatusSession}: the one kind of C{session} channel the relay offers.  No
shell and no command runs on the relay:

  - C{shell} (a plain C{ssh -R ... relay}): prints the connection's shares
    as they are published (share URLs, the TCP shares and how to reach
    them), and stays open until the user types Ctrl-C, Ctrl-D or C{q}, or
    the connection ends; an EOF on its input (C{ssh < /dev/null}) does not
    end it;
  - C{exec help} and C{exec status} print and exit 0; any other command
    prints why on stderr and exits 1;
  - C{pty-req} and C{window-change} are accepted (and ignored), every other
    request (C{env}, C{subsystem}, C{x11-req}, agent forwarding) refused.

A display whose client does not read holds at most C{maxBuffer} bytes
beyond its window (C{SSHConfig.max_status_buffer}) and one print more: later
lines are dropped, and counted in a line it gets once it reads again.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from twisted.conch.ssh.channel import SSHChannel
from twisted.logger import Logger

from nfltr.ssh import DEFAULT_MAX_STATUS_BUFFER

#: Keys that end a status display: Ctrl-C, Ctrl-D, q, Q.
END_KEYS = frozenset(b"\x03\x04qQ")
#: Extended data type of stderr (RFC 4254, 5.2).
STDERR = 1
#: The longest command the relay reads.
MAX_COMMAND = 1024


class StatusSession(SSHChannel):
    """
    A C{session} channel; see the module.

    @ivar commands: the output of each command by name (called when run).
    @ivar banner: returns the lines a shell starts with.
    @ivar later: see L{__init__}.
    @ivar onShell: called with this session when it becomes a status
        display (to be sent later lines), and C{onEnd} when it ends.
    @ivar maxBuffer: the most it buffers beyond the client's window.
    @ivar dropped: lines dropped since the client last had room.
    """

    name = b"session"
    log = Logger()
    conn: Any

    def __init__(
        self, commands: dict[str, Callable[[], list[str]]], banner: Callable[[], list[str]],
        onShell: Callable[[StatusSession], None], onEnd: Callable[[StatusSession], None],
        later: Callable[[Callable[[], None]], Any], maxBuffer: int = DEFAULT_MAX_STATUS_BUFFER,
        **kwargs: Any,
    ) -> None:
        """
        @param later: runs a call in a later reactor turn (the output of a
            command follows the request's reply).
        """
        super().__init__(**kwargs)
        self.maxBuffer = maxBuffer
        self.dropped = 0
        self.later = later
        self.commands = commands
        self.banner = banner
        self.onShell = onShell
        self.onEnd = onEnd
        self.shell = False
        self.started = False

    def logPrefix(self) -> str:
        """
        Logs name the channel, not its peer.
        """
        return f"SSHChannel session ({self.id})"

    def channelOpen(self, specificData: bytes) -> None:
        """
        Nothing to do until a request.
        """

    def requestReceived(self, requestType: bytes, data: bytes) -> bool:
        """
        See the module.
        """
        if requestType in (b"pty-req", b"window-change"):
            return True
        if self.started:
            return False
        if requestType == b"shell":
            self.started = self.shell = True
            self.lines(self.banner())
            self.onShell(self)
            return True
        if requestType == b"exec":
            self.started = True
            self.later(lambda: self._exec(data))
            return True
        self.log.debug("refused session request {request!r}", request=requestType)
        return False

    def lines(self, lines: list[str]) -> None:
        """
        Print C{lines} (terminal line ends: the client may have a pty), or
        count them if the client has not read what is buffered.
        """
        if not lines or self.localClosed:
            return
        if len(self.buf) >= self.maxBuffer:
            self.dropped += len(lines)
            return
        if self.dropped:
            lines = [f"({self.dropped} lines not shown: this display was not reading)", *lines]
            self.dropped = 0
        self.write("".join(line + "\r\n" for line in lines).encode("utf-8"))

    def dataReceived(self, data: bytes) -> None:
        """
        In a status display, an end key ends the session.
        """
        if self.shell and END_KEYS.intersection(data):
            self._exit(0)

    def eofReceived(self) -> None:
        """
        No more input: a status display stays (its shares with it).
        """

    def closeReceived(self) -> None:
        """
        The client closed: close too.
        """
        self.loseConnection()

    def closed(self) -> None:
        """
        Gone.
        """
        self.onEnd(self)

    def _exec(self, data: bytes) -> None:
        if len(data) < 4:  # noqa: PLR2004
            self._fail("malformed exec request")
            return
        (length,) = struct.unpack_from(">L", data)
        raw = data[4 : 4 + length]
        if length > MAX_COMMAND or len(raw) != length:
            self._fail("malformed exec request")
            return
        command = raw.decode("utf-8", "replace").strip()
        run = self.commands.get(command)
        if run is None:
            known = ", ".join(sorted(self.commands))
            self._fail(f"nfltr relay: no command {command!r} here (this is not a shell); "
                       f"try: {known}")
            return
        self.lines(run())
        self._exit(0)

    def _fail(self, message: str) -> None:
        self.writeExtended(STDERR, (message + "\r\n").encode("utf-8"))
        self._exit(1)

    def _exit(self, status: int) -> None:
        if self.localClosed:
            return
        self.conn.sendRequest(self, b"exit-status", struct.pack(">L", status))
        self.conn.sendEOF(self)
        self.loseConnection()
