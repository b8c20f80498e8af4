# -*- test-case-name: tests.wire -*-
"""
Vocabulary every role shares: what a peer says, made safe to log; addresses
as people write them.
"""

from .addresses import format_address
from .peertext import DEFAULT_BURST, DEFAULT_INTERVAL, PEER_TEXT_LIMIT, LogThrottle, peerText

__all__ = [
    "DEFAULT_BURST", "DEFAULT_INTERVAL", "PEER_TEXT_LIMIT", "LogThrottle", "format_address",
    "peerText",
]
