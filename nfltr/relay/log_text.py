# -*- test-case-name: tests.relay.test_update_ports -*-
"""
Values as a user reads them in the relay's log lines (never a Python repr).
"""

from __future__ import annotations

from collections.abc import Iterable


def listed(items: Iterable[object]) -> str:
    """
    C{items} for a log line a user reads: comma-separated, or C{none}.
    """
    return ", ".join(str(item) for item in items) or "none"
