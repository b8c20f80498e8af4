# -*- test-case-name: tests.test_messages -*-
"""
The application's messages on a link: what agents and clients state in
their hello, what the relay answers, and how session targets are spelled.
Pure functions over dicts and strings; no I/O.

Dialer hello (C{app} field of the link hello)::

    {"role": "agent", "key": KEY, "name": NAME, "version": V,
     "tcp": [{"port": 3000, "e2ee": true}, ...]}
    {"role": "client", "key": KEY, "version": V}

The relay answers with a control message C{welcome} ({"account", "name"})
or C{refused} ({"reason", "message"}) and, after a refusal, a GOAWAY.

Session targets: a client opens C{tcp:AGENT:PORT} on its link to the relay;
the relay opens C{tcp:PORT} on the agent's link.  Whatever the cause (no such
agent, another account's agent, a port the agent does not share), the relay
refuses a client's session with the same RESET: L{NOT_FOUND_CODE} and
L{NOT_FOUND_REASON}.

The API key travels in the hello: never log a hello's fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nfltr import __version__
from nfltr.link import ErrorCode, RefusalReason

AGENT = "agent"
CLIENT = "client"
WELCOME = "welcome"

NOT_FOUND_CODE = ErrorCode.REFUSED
NOT_FOUND_REASON = "no such agent or port"

NAME_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
MAX_SHARES = 64


class MessageError(ValueError):
    """
    A message or target is malformed; the text says what is wrong.
    """


def check_name(name: str) -> str:
    """
    Validate an agent name: a DNS label in lower case.

    @raise MessageError: with a message a user can act on.
    """
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise MessageError(
            f"invalid agent name {name!r}: use 1-63 lowercase letters, digits and hyphens, "
            "not starting or ending with a hyphen"
        )
    return name


def check_port(port: Any) -> int:
    """
    Validate a TCP port number.
    """
    if type(port) is not int or not 1 <= port <= 65535:  # noqa: PLR2004
        raise MessageError(f"invalid port {port!r}: must be 1..65535")
    return port


@dataclass(frozen=True)
class TcpShare:
    """
    A TCP port an agent shares.

    @ivar e2ee: the agent ends TLS for each session itself.
    """

    port: int
    e2ee: bool = True

    def to_json(self) -> dict[str, Any]:
        """
        The share as it travels in the hello.
        """
        return {"port": self.port, "e2ee": self.e2ee}


@dataclass(frozen=True)
class DialerHello:
    """
    A validated agent or client hello.
    """

    role: str
    key: str
    name: str | None
    version: str
    tcp: tuple[TcpShare, ...]


def agent_hello(key: str, name: str, tcp: list[TcpShare]) -> dict[str, Any]:
    """
    The C{app} part of an agent's hello.
    """
    return {
        "role": AGENT, "key": key, "name": check_name(name), "version": __version__,
        "tcp": [share.to_json() for share in tcp],
    }


def client_hello(key: str) -> dict[str, Any]:
    """
    The C{app} part of a client's hello.
    """
    return {"role": CLIENT, "key": key, "version": __version__}


def parse_dialer_hello(app: dict[str, Any]) -> DialerHello:
    """
    Validate the C{app} part of a dialer's hello on the relay.

    @raise MessageError: naming the bad field (never echoing the key).
    """
    role = app.get("role")
    if role not in (AGENT, CLIENT):
        raise MessageError(f"unknown role {role!r}")
    key = app.get("key")
    if not isinstance(key, str) or not key:
        raise MessageError("an API key is required (--key or NFLTR_KEY)")
    version = app.get("version")
    version = version if isinstance(version, str) else "unknown"
    if role == CLIENT:
        return DialerHello(CLIENT, key, None, version, ())
    name = check_name(app.get("name"))  # type: ignore[arg-type]
    raw = app.get("tcp", [])
    if not isinstance(raw, list) or len(raw) > MAX_SHARES:
        raise MessageError(f"tcp must be a list of at most {MAX_SHARES} shares")
    shares = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("e2ee", True), bool):
            raise MessageError("each tcp share needs a port and an e2ee flag")
        shares.append(TcpShare(check_port(item.get("port")), item.get("e2ee", True)))
    if len({s.port for s in shares}) != len(shares):
        raise MessageError("a port is shared twice")
    return DialerHello(AGENT, key, name, version, tuple(shares))


def welcome(account: str, name: str | None) -> dict[str, Any]:
    """
    The relay's answer to an accepted hello.
    """
    return {"type": WELCOME, "account": account, "name": name}


def refusal_text(message: dict[str, Any]) -> tuple[RefusalReason | None, str]:
    """
    Read a C{refused} message: its reason (if known) and its text.
    """
    try:
        reason: RefusalReason | None = RefusalReason(str(message.get("reason")))
    except ValueError:
        reason = None
    text = message.get("message")
    return reason, text if isinstance(text, str) else "refused"


def client_target(agent: str, port: int) -> str:
    """
    The target a client opens to reach C{agent}'s C{port}.
    """
    return f"tcp:{check_name(agent)}:{check_port(port)}"


def parse_client_target(target: str) -> tuple[str, int]:
    """
    Split a client's target into agent name and port.

    @raise MessageError: not C{tcp:NAME:PORT}.
    """
    kind, _, rest = target.partition(":")
    name, _, port = rest.rpartition(":")
    if kind != "tcp" or not port.isdigit():
        raise MessageError(f"bad target {target!r}")
    return check_name(name), check_port(int(port))


def agent_target(port: int) -> str:
    """
    The target the relay opens on an agent's link.
    """
    return f"tcp:{check_port(port)}"


def parse_agent_target(target: str) -> int:
    """
    Read the port of a target the relay opened on an agent's link.
    """
    kind, _, port = target.partition(":")
    if kind != "tcp" or not port.isdigit():
        raise MessageError(f"bad target {target!r}")
    return check_port(int(port))
