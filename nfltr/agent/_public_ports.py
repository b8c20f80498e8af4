# -*- test-case-name: tests.agent.test_public_ports -*-
"""
What the agent says about its public ports (C{nfltr tcp PORT --public-port
N}, L{nfltr.relay.public_ports}): the relay's welcome names the port each
got, and a relay that does not know public ports names none, which the
agent must not take for a success.
"""

from __future__ import annotations

from typing import Any

#: Why the agent stops when the relay's welcome has no C{public_ports}.
OLD_RELAY = "the relay does not publish public ports (it runs an older nfltr): upgrade the " \
            "relay, or run without --public-port"


def public_port_lines(relay: str, welcome: dict[str, Any]) -> list[str]:
    """
    The lines that tell the user where visitors reach each public port:
    the relay's host (from C{relay}, the agent's C{HOST:PORT} of it) and
    the port the welcome names.
    """
    host = relay.rpartition(":")[0] or relay
    lines = []
    for answer in welcome.get("public_ports") or ():
        if not isinstance(answer, dict):
            continue
        port, public = answer.get("port"), answer.get("public_port")
        if type(port) is int and type(public) is int:
            lines.append(
                f"public port {host}:{public} -> port {port}: visitors connect straight to it, "
                "with no connector; not end-to-end encrypted (the visitor speaks to the "
                "service directly: use TLS in the service if it needs it)"
            )
    return lines
