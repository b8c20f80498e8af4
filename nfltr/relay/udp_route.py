# -*- test-case-name: tests.relay.test_udp_route -*-
"""
The route of a client's datagram session (C{udp:<agent>:<port>},
docs/link-protocol.md section 17): to an agent of the client's account
that declared UDP port C{<port>}, as C{udp:<port>} on the agent's link.
A malformed target is refused as a C{tcp:} one is ("bad target ...",
"invalid ...").

The two sessions are spliced as a TCP route's are: the datagrams' framing
is carried as it is, and the splice's backpressure stalls only this pair
of sessions (each has its own credit), so the client's datagram session,
paused, drops what its visitors send (L{nfltr.udp.DatagramSession}).  An
agent another replica holds is not reached (datagram sessions are not
routed between replicas yet): the client is told what it is told for an
unknown agent.
"""

from __future__ import annotations

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkSession
from nfltr.wire import peerText
from nfltr.wire.messages import NOT_FOUND_CODE, NOT_FOUND_REASON, MessageError, check_name
from nfltr.wire.udp import parse_udp_target, udp_target

from .directory import Directory
from .tcp_route import RouteRefused, SessionEnd, TCPRoute


def is_udp_target(target: str) -> bool:
    """
    Whether a client's session asks for a datagram route.
    """
    return target.startswith("udp:")


def route_udp(directory: Directory, route: TCPRoute, account: str, session: LinkSession) -> None:
    """
    Route the client's datagram C{session} (of C{account}), or refuse it.
    """
    parsed = parse_udp_target(session.target)
    if parsed is None or parsed[0] is None:
        session.refuse(ErrorCode.REFUSED, f"bad target '{peerText(session.target)}'")
        return
    try:
        name, port = check_name(parsed[0]), parsed[1]
    except MessageError as e:
        session.refuse(ErrorCode.REFUSED, str(e))
        return
    entry = directory.agent(name)
    if entry is None or entry.account != account or port not in entry.udp:
        session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
        return
    try:
        end = route.openOn(entry.holder, udp_target(port), SessionEnd("client link lost"))
    except RouteRefused as e:
        session.refuse(e.code, e.reason)
        return
    session.accept(end)
