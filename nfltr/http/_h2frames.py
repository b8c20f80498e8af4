# -*- test-case-name: tests.http.test_h2limits -*-
"""
The HTTP/2 attacks a visitor's frames can make, seen before h2 reads them,
sans I/O: L{FrameWatch} follows the frame headers of what a visitor sends
(RFC 9113 section 4.1) and says when one of L{H2Limits}' connection limits
breaks: a header block of too many frames or bytes (the CONTINUATION
flood: stopped at the frame header that announces it, before its bytes are
held), too many SETTINGS and PINGs (floods of frames that each ask for an
answer) in a window.  (Rapid reset is counted by the exchange, which knows
which resets cancel a request in flight: L{Rate}.)
"""

from __future__ import annotations

from collections.abc import Callable

from ._limits import H2Limits

#: What a client's connection begins with (RFC 9113 section 3.4).
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_FRAME_HEAD = 9
_HEADERS, _SETTINGS, _PUSH_PROMISE, _PING, _CONTINUATION = 0x1, 0x4, 0x5, 0x6, 0x9
_END_HEADERS, _ACK = 0x4, 0x1


class Rate:
    """
    Counts events in fixed windows of C{window} seconds.
    """

    def __init__(self, most: int, window: float, now: Callable[[], float]) -> None:
        self.most, self.window, self.now = most, window, now
        self.start, self.count = now(), 0

    def add(self) -> bool:
        """
        One more; whether the window's count is still within C{most}.
        """
        now = self.now()
        if now - self.start >= self.window:
            self.start, self.count = now, 0
        self.count += 1
        return self.count <= self.most


class FrameWatch:
    """
    Follows one visitor connection's frames; see the module.

    @ivar broken: what the visitor did, once it broke a limit (it stays so).
    """

    def __init__(self, limits: H2Limits, now: Callable[[], float]) -> None:
        self._limits = limits
        self._preface = len(PREFACE)
        self._head = b""
        self._skip = 0
        self._blockFrames = 0
        self._blockBytes = 0
        self._control = Rate(limits.max_control_frames, limits.rate_window, now)
        self.broken: str | None = None

    def feed(self, data: bytes) -> str | None:
        """
        Follow C{data}, the next bytes from the visitor.

        @return: what broke a limit (the first time and after), or L{None}.
        """
        view = memoryview(data)
        while view and self.broken is None:
            if self._preface:
                taken = min(self._preface, len(view))
                self._preface -= taken
                view = view[taken:]
            elif self._skip:
                taken = min(self._skip, len(view))
                self._skip -= taken
                view = view[taken:]
            else:
                taken = min(_FRAME_HEAD - len(self._head), len(view))
                self._head += bytes(view[:taken])
                view = view[taken:]
                if len(self._head) == _FRAME_HEAD:
                    head, self._head = self._head, b""
                    self.broken = self._frame(head)
        return self.broken

    def _frame(self, head: bytes) -> str | None:
        length = int.from_bytes(head[:3], "big")
        kind, flags = head[3], head[4]
        self._skip = length
        limits = self._limits
        if kind in (_HEADERS, _PUSH_PROMISE, _CONTINUATION):
            if kind != _CONTINUATION:
                self._blockFrames = self._blockBytes = 0
            self._blockFrames += 1
            self._blockBytes += length
            if self._blockFrames > limits.max_header_block_frames:
                return "a header block of too many frames"
            if self._blockBytes > limits.max_header_block_size:
                return "a header block too large"
            if flags & _END_HEADERS:
                self._blockFrames = self._blockBytes = 0
        elif kind in (_SETTINGS, _PING) and not flags & _ACK and not self._control.add():
            return "too many SETTINGS or PING frames"
        return None
