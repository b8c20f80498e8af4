# -*- test-case-name: tests.inspect.test_ws -*-
"""
WebSocket frames summarized for the inspector, sans I/O: L{FrameHeads}
reads the frame heads of one direction of a switched connection (RFC 6455
section 5.2) as its bytes pass, whatever their split, and skips the
payloads without keeping them: it holds at most one head (14 bytes).
Nothing is checked: the service and the visitor do that; a stream that is
not WebSocket reads as nonsense frames, harmlessly.
"""

from __future__ import annotations

#: Opcodes by name (RFC 6455 section 5.2).
OPCODES = {0: "continuation", 1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong"}
_SHORT = 125
_LEN16, _LEN64 = 126, 127
_MASK_BYTES = 4


def head_length(head: bytes | bytearray) -> int | None:
    """
    The length of the frame head that starts C{head}, once its first two
    bytes are there.
    """
    if len(head) < 2:  # noqa: PLR2004 - a frame's first two bytes
        return None
    size = head[1] & 0x7F
    extended = 2 if size == _LEN16 else 8 if size == _LEN64 else 0
    return 2 + extended + (_MASK_BYTES if head[1] & 0x80 else 0)


class FrameHeads:
    """
    The frames of one direction; see the module.
    """

    def __init__(self) -> None:
        self._head = bytearray()
        self._skip = 0

    def feed(self, data: bytes) -> list[tuple[str, int]]:
        """
        The frames whose heads C{data} completed: opcode name and payload
        length.
        """
        frames = []
        i, end = 0, len(data)
        while i < end:
            if self._skip:
                step = min(self._skip, end - i)
                self._skip -= step
                i += step
                continue
            self._head.append(data[i])
            i += 1
            need = head_length(self._head)
            if need is not None and len(self._head) == need:
                frames.append(self._frame())
        return frames

    def _frame(self) -> tuple[str, int]:
        head, self._head = self._head, bytearray()
        size = head[1] & 0x7F
        if size > _SHORT:
            width = 2 if size == _LEN16 else 8
            size = int.from_bytes(head[2:2 + width], "big")
        self._skip = size
        opcode = head[0] & 0x0F
        return OPCODES.get(opcode, f"opcode {opcode}"), size
