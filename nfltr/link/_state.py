# -*- test-case-name: tests.link.test_connection -*-
"""
The states of a L{nfltr.link.LinkConnection}.
"""

from __future__ import annotations

from enum import Enum


class State(Enum):
    """
    The connection's states; ERROR and CLOSED are final.
    """

    PREAMBLE = "awaiting the peer's preamble"
    HELLO = "awaiting the peer's hello"
    OPEN = "open"
    ERROR = "failed"
    CLOSED = "closed"
