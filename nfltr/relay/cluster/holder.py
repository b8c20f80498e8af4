# -*- test-case-name: tests.relay.cluster.test_replica_link -*-
"""
An agent another replica holds, as this replica sees it: L{ReplicaHolder},
the third kind of L{IAgentHolder} (beside a native link and an SSH
connection), whose sessions are sessions on a replica link to the holding
replica.

The targets it opens there (the replica link's own, see
C{docs/link-protocol.md}):

  - C{replica-tcp:<agent>:<port>:<key>}: a client's session to C{<agent>}'s
    TCP C{<port>}, with the client's API key, which the holding replica
    checks itself (L{nfltr.relay.cluster.listener}): the account a replica
    or a presence record claims is never taken on trust;
  - C{replica-rtcp:...} and C{replica-resume:...}, the same fields: a
    connector's resumable session and the resumption of one
    (L{nfltr.wire.resume}), which the holding replica opens as C{rtcp:<port>}
    and C{resume:<port>} on the agent's link (it alone knows whether the
    agent resumes sessions); nothing about them is kept on either replica;
  - C{share:<name>@<visitor>}: a share visitor's raw bytes (e2ee,
    passthrough), as a relay opens it on an agent's link.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from zope.interface import implementer

from nfltr.link import RefusalReason
from nfltr.link.twisted import LinkProtocol, LinkSession, LinkUnavailable
from nfltr.wire import peerText
from nfltr.wire.messages import (
    SHARE,
    MessageError,
    check_name,
    check_port,
    is_port_text,
    parse_agent_target,
)
from nfltr.wire.resume import PLAIN, RESUMABLE, RESUMING, parse_agent_resume_target

from ..interfaces import REPLICA, HolderFigures, IAgentHolder

REPLICA_TCP = f"replica-{PLAIN}"
#: The kinds of client sessions a replica link carries (C{tcp}, and the resumable C{rtcp} and
#: C{resume}), by their replica target's kind.
REPLICA_KINDS = {f"replica-{kind}": kind for kind in (PLAIN, RESUMABLE, RESUMING)}
#: How many targets L{shown_target} keeps (kind, agent and port each).
SHOWN_TARGETS = 1024


def replica_tcp_target(name: str, port: int, key: str, kind: str = PLAIN) -> str:
    """
    The target of a client's session (of C{kind}: C{tcp}, C{rtcp}, C{resume}) to C{name}'s
    C{port} on the replica that holds it, with the client's API key.
    """
    if f"replica-{kind}" not in REPLICA_KINDS:
        raise ValueError(f"not a client session kind: {kind}")
    return f"replica-{kind}:{check_name(name)}:{check_port(port)}:{key}"


def parse_replica_tcp_target(target: str) -> tuple[str, str, int, str] | None:
    """
    The kind (C{tcp}, C{rtcp}, C{resume}), agent, port and key of a replica TCP target;
    L{None} if C{target} is not one.

    @raise MessageError: a replica TCP target that does not parse.
    """
    prefix, _, rest = target.partition(":")
    kind = REPLICA_KINDS.get(prefix)
    if kind is None:
        return None
    try:
        name, port, key = rest.split(":")
    except ValueError:
        name = port = key = ""
    if not is_port_text(port) or not key:
        # Never the key itself in the message: it is a secret.
        raise MessageError(f"bad target '{prefix}:{peerText(name)}:...'")
    return kind, check_name(name), check_port(int(port)), key


@lru_cache(maxsize=SHOWN_TARGETS)
def shown_target(kind: str, name: str, port: int) -> str:
    """
    What a client's session (of C{kind}) to C{name}'s C{port} shows on the
    replica link once open: its target without the key (L{without_key}),
    one string for every session to the same agent and port: a replica
    holds a target per forwarded session, idle ones included.
    """
    return f"replica-{kind}:{name}:{port}"


def without_key(target: str) -> str:
    """
    C{target} with a replica TCP target's key left out: what a session shows
    once it is open (the key is a secret; it travels only in the OPEN).
    """
    if target.partition(":")[0] not in REPLICA_KINDS:
        return target
    return target.rsplit(":", 1)[0]


@implementer(IAgentHolder)
class ReplicaHolder:
    """
    Agent C{name}, held by the replica at the other end of C{link}; sessions
    are opened for a client that logged in with C{key}.

    @ivar link: a replica link to the holding replica.
    @ivar since: when this holder was made (the relay clock's time).
    """

    kind = REPLICA

    def __init__(self, link: LinkProtocol, name: str, key: str | None, since: float) -> None:
        self.link = link
        self.name = name
        self.key = key
        self.since = since

    def canOpen(self) -> bool:
        """
        Whether the replica link can open a session now.
        """
        return self.link.canOpen()

    def openSession(self, target: str, protocol: Any, firstBytes: bytes = b"") -> LinkSession:
        """
        Open C{target} (C{tcp:PORT}, C{rtcp:PORT}, C{resume:PORT},
        C{share:NAME@VISITOR}) at the holding replica, as the replica link's
        target for it.

        @raise LinkUnavailable: the link cannot open one now, or C{target}
            cannot be carried (a TCP session without a key).
        """
        if target.startswith(f"{SHARE}:"):
            return self.link.openSession(target, protocol, firstBytes)
        if self.key is None:
            raise LinkUnavailable("a TCP session across replicas needs the client's key")
        resumable = parse_agent_resume_target(target)
        kind, port = resumable if resumable is not None else (PLAIN, parse_agent_target(target))
        forwarded = replica_tcp_target(self.name, port, self.key, kind)
        session = self.link.openSession(forwarded, protocol, firstBytes)
        session.target = shown_target(kind, self.name, port)  # what getHost() and reprs show
        return session

    def refuse(self, reason: RefusalReason, message: str) -> None:
        """
        Nothing to turn away here: the agent's connection is the holding
        replica's.
        """

    def figures(self) -> HolderFigures:
        """
        The replica link's figures.
        """
        connection = self.link.connection
        sessions = connection.session_count if connection is not None else 0
        return HolderFigures(REPLICA, sessions, self.link.bytesReceived, self.link.bytesSent,
                             self.link.rtt, self.since)
