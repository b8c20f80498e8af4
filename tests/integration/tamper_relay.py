"""
Run the relay as a hostile one would be: it carries resumable sessions as usual, but in the
first resumed session it flips one byte of the first DATA record the agent resends (the
65th byte of its payload), as the relay in the middle of a session could.  It
prints what it saw and did (lines starting with C{tamper:}):

  - for each new resumable session (C{rtcp:}), the DATA bytes the agent sent through it so
    far, after each read (so the last line before a kill tells what left the agent);
  - once the agent sent L{HOLD} bytes of DATA in such a session, that it holds what comes
    after instead of passing it on (as a relay in the middle could): those bytes passed the
    first relay but never reached the connector, so the agent must resend them;
  - for the resumed session it alters, the connector's position (the first byte resent) and
    the position of the byte it flipped, in the agent's stream.

    python -m tests.integration.tamper_relay relay [OPTIONS]
"""

from __future__ import annotations

import struct
import sys
from typing import Any

from nfltr.relay.tcp_route import SessionEnd, TCPRoute
from nfltr.resume import RECORD_HEADER_SIZE, TOKEN_SIZE
from nfltr.wire.resume import RESUMABLE, RESUMING
from tests.resume.test_tamper import Tamper

# A RESUME record: its header, the token, the position.
_RESUME_SIZE = RECORD_HEADER_SIZE + TOKEN_SIZE + 8
# How far into the first resent DATA record the byte flipped is.
_INTO = 64
#: The agent's DATA bytes of a new session passed on; what it sends after them is held.
HOLD = 2 * 1024 * 1024
_openOn = TCPRoute.openOn
_dataReceived = SessionEnd.dataReceived
_state = {"altered": False}


def _say(line: str) -> None:
    print(f"tamper: {line}", flush=True)


class _Resumed:
    """
    The two directions of a resumed session: the connector's RESUME read for its position,
    the agent's bytes through a L{Tamper}.
    """

    def __init__(self) -> None:
        self.first = bytearray()
        self.position: int | None = None
        self.tamper = Tamper(0, lambda length: RECORD_HEADER_SIZE + min(length - 1, _INTO))

    def fromConnector(self, data: bytes) -> bytes:
        if self.position is None:
            self.first += data
            if len(self.first) >= _RESUME_SIZE:
                self.position = struct.unpack_from("!Q", self.first, _RESUME_SIZE - 8)[0]
        return data

    def fromAgent(self, data: bytes) -> bytes:
        buffer = bytearray(data)
        self.tamper.feed(buffer)
        if self.tamper.done and self.tamper.flipped is not None and self.position is not None:
            _say(f"resumed from {self.position}, flipped the byte at "
                 f"{self.position + self.tamper.flipped}")
            self.tamper.flipped = None
        return bytes(buffer)


class _Counted:
    """
    The agent's bytes of a new resumable session, counted; those read once L{HOLD} passed
    are held (never passed on).
    """

    def __init__(self) -> None:
        self.tamper = Tamper(-1, lambda length: 0)
        self.held: int | None = None

    def fromAgent(self, data: bytes) -> bytes:
        if self.held is None and self.tamper.passed >= HOLD:
            self.held = self.tamper.passed
            _say(f"holding the agent's bytes from {self.held}")
        self.tamper.feed(bytearray(data))
        _say(f"the agent sent {self.tamper.passed}")
        return data if self.held is None else b""


def _openOnAltering(self: TCPRoute, holder: Any, target: str, clientEnd: Any) -> Any:
    end = _openOn(self, holder, target, clientEnd)
    agentEnd = clientEnd.other
    if target.startswith(f"{RESUMING}:") and not _state["altered"]:
        _state["altered"] = True
        resumed = _Resumed()
        clientEnd.alter = resumed.fromConnector
        agentEnd.alter = resumed.fromAgent
    elif target.startswith(f"{RESUMABLE}:"):
        agentEnd.alter = _Counted().fromAgent
    return end


def _dataReceivedAltered(self: SessionEnd, data: bytes) -> None:
    alter = getattr(self, "alter", None)
    if alter is not None:
        data = alter(data)
    if data:
        _dataReceived(self, data)


TCPRoute.openOn = _openOnAltering  # type: ignore[method-assign]
SessionEnd.dataReceived = _dataReceivedAltered  # type: ignore[method-assign]

if __name__ == "__main__":
    from nfltr.cli import main

    sys.exit(main(sys.argv[1:]))
