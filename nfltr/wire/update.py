# -*- test-case-name: tests.wire.test_update -*-
"""
An agent's new declaration after its hello: the C{update} control message
and the relay's C{updated} answer (C{nfltr up} reloading its file on
SIGHUP; specified in docs/link-protocol.md, section 15).

An agent sends C{update} only to a relay whose welcome listed the feature
C{update} (L{nfltr.wire.messages.AGENT_FEATURES}); an older relay ignores
control messages it does not know, and lists no features.  One update at a
time: the agent waits for the answer to one before it sends the next.

  - C{{"type": "update", "seq": N, "tcp": [...], "http": [...],
    "udp": [...]}}: the agent's whole declaration, as in its hello,
    replacing it (C{udp} absent: the UDP ports stay as they are).  The
    relay publishes the share URLs that are new or changed (a share's
    fields but C{csr} differ), withdraws those no longer declared, routes
    the new TCP and UDP ports, and publishes and withdraws public ports the
    same way; sessions in flight are not touched.
  - C{{"type": "updated", "seq": N, "shares": [...]}}: done; C{shares} as
    in the welcome, for the share URLs it published, and
    C{public_ports} / C{public_udp_ports} as in the welcome, for the public
    ports it published (absent: none).
  - C{{"type": "updated", "seq": N, "refused": REASON, "message": TEXT}}:
    nothing changed (a name another account holds, say); the link stays.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from nfltr.wire.messages import (
    PUBLIC_PORTS,
    HttpShare,
    MessageError,
    TcpShare,
    parse_http_shares,
    parse_tcp_shares,
)
from nfltr.wire.udp import PUBLIC_UDP_PORTS, UdpShare, parse_udp_shares

UPDATE, UPDATED = "update", "updated"
#: The feature a relay's welcome lists when it takes updates.
FEATURE = "update"
#: The largest sequence number (a JSON integer every peer reads exactly).
MAX_SEQ = 2**53 - 1


@dataclass(frozen=True)
class Update:
    """
    A validated C{update}.
    """

    seq: int
    tcp: tuple[TcpShare, ...]
    http: tuple[HttpShare, ...]
    #: L{None}: the UDP ports stay as they are.
    udp: tuple[UdpShare, ...] | None = None


@dataclass(frozen=True)
class Updated:
    """
    A validated C{updated}: the shares published, or why nothing changed.
    """

    seq: int
    shares: tuple[dict[str, Any], ...] = ()
    refused: str | None = None
    message: str = ""
    #: The public ports published (C{public_ports}, C{public_udp_ports}),
    #: as the welcome has them.
    ports: dict[str, Any] = field(default_factory=dict)


def update_message(
    seq: int, tcp: list[TcpShare], http: list[HttpShare], udp: list[UdpShare] | None = None,
) -> dict[str, Any]:
    """
    An agent's C{update} (C{udp} L{None}: no C{udp} key).
    """
    message = {"type": UPDATE, "seq": seq, "tcp": [s.to_json() for s in tcp],
               "http": [s.to_json() for s in http]}
    if udp is not None:
        message["udp"] = [s.to_json() for s in udp]
    return message


def _seq(message: dict[str, Any]) -> int:
    seq = message.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_SEQ:
        raise MessageError(f"seq must be an integer in 0..{MAX_SEQ}")
    return seq


def parse_update(message: dict[str, Any]) -> Update:
    """
    Validate an C{update} on the relay.

    @raise MessageError: naming what is wrong.
    """
    udp = message.get("udp")
    return Update(_seq(message), parse_tcp_shares(message.get("tcp", [])),
                  parse_http_shares(message.get("http", [])),
                  None if udp is None else parse_udp_shares(udp))


def updated_message(
    seq: int, shares: list[dict[str, Any]], ports: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """
    The relay's answer to an update it made (C{ports}: the public ports it
    published, keyed as in the welcome).
    """
    return {"type": UPDATED, "seq": seq, "shares": shares, **(ports or {})}


def update_refused(seq: int, reason: str, message: str) -> dict[str, Any]:
    """
    The relay's answer to an update it refused (nothing changed).
    """
    return {"type": UPDATED, "seq": seq, "refused": reason, "message": message}


def parse_updated(message: dict[str, Any]) -> Updated:
    """
    Validate the relay's C{updated} on the agent.

    @raise MessageError: naming what is wrong.
    """
    seq = _seq(message)
    refused = message.get("refused")
    if refused is not None:
        text = message.get("message")
        return Updated(seq, (), str(refused), text if isinstance(text, str) else "")
    shares = message.get("shares", [])
    if not isinstance(shares, list) or not all(isinstance(s, dict) for s in shares):
        raise MessageError("shares must be a list of objects")
    ports = {key: message[key] for key in (PUBLIC_PORTS, PUBLIC_UDP_PORTS)
             if isinstance(message.get(key), list)}
    return Updated(seq, tuple(shares), ports=ports)


def changed_shares(old: tuple[HttpShare, ...],
                   new: tuple[HttpShare, ...]) -> tuple[list[HttpShare], list[str]]:
    """
    What an update changes in the share URLs: those to publish (new, or
    changed in any field but the signing request), and the names to
    withdraw.
    """
    before = {s.name: replace(s, csr=None) for s in old}
    publish = [s for s in new if before.get(s.name) != replace(s, csr=None)]
    names = {s.name for s in new}
    return publish, [name for name in before if name not in names]
