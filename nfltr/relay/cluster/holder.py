# -*- test-case-name: tests.relay.cluster.test_replica_link -*-
"""
An agent another replica holds, as this replica sees it: L{ReplicaHolder},
the third kind of L{IAgentHolder} (beside a native link and an SSH
connection), whose sessions are sessions on a replica link to the holding
replica.

The targets it opens there (the replica link's own, see
C{docs/link-protocol.md}):

  - C{replica-tcp:<agent>:<port>:<key>[@<client>]}: a client's session to
    C{<agent>}'s TCP C{<port>}, with the client's API key, which the holding
    replica checks itself (L{nfltr.relay.cluster.listener}): the account a
    replica or a presence record claims is never taken on trust; the
    client's address follows for the agent's PROXY header;
  - C{replica-ssh:<agent>:<port>:publickey:<blob>[@<client>]} (or
    C{password:<key>}): an SSH client's C{ssh -L}/C{-W} channel, with the
    public key it logged in with (the forwarding replica checked its
    signature) or the API key it gave as its password: the holding replica
    finds the account itself and opens only ports shared without
    end-to-end TLS, as for an SSH client of its own;
  - C{replica-rtcp:...} and C{replica-resume:...}, the same fields: a
    connector's resumable session and the resumption of one
    (L{nfltr.wire.resume}), which the holding replica opens as C{rtcp:<port>}
    and C{resume:<port>} on the agent's link (it alone knows whether the
    agent resumes sessions); nothing about them is kept on either replica;
  - C{share:<name>@<visitor>}: a share visitor's raw bytes (e2ee,
    passthrough), as a relay opens it on an agent's link;
  - C{plain:<name>@<visitor>}: a visitor of the share's plain-HTTP URL on
    the HTTP port (C{--plain-http}), its bytes as they came: the holding
    replica serves it with the share's plain-HTTP proxy.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from zope.interface import implementer

from nfltr.link import MAX_TARGET, RefusalReason
from nfltr.link.twisted import LinkProtocol, LinkSession, LinkUnavailable
from nfltr.wire import peerText
from nfltr.wire.messages import (
    SHARE,
    MessageError,
    check_name,
    check_port,
    is_port_text,
    parse_addressed_target,
    parse_agent_target,
    parse_named_target,
)
from nfltr.wire.resume import PLAIN, RESUMABLE, RESUMING, parse_agent_resume_target

from ..interfaces import REPLICA, HolderFigures, IAgentHolder

REPLICA_TCP = f"replica-{PLAIN}"
#: An SSH client's session (C{ssh -L}/C{-W}): its credential is C{publickey:BLOB} (the base64
#: public key it logged in with) or C{password:KEY} (the API key it gave as its password).
SSH_CLIENT = "ssh"
#: How an SSH client logged in, as its credential names it.
SSH_METHODS = ("publickey", "password")
#: The kinds of client sessions a replica link carries (C{tcp}, the resumable C{rtcp} and
#: C{resume}, and an SSH client's C{ssh}), by their replica target's kind.
REPLICA_KINDS = {f"replica-{kind}": kind for kind in (PLAIN, RESUMABLE, RESUMING, SSH_CLIENT)}
#: How many targets L{shown_target} keeps (kind, agent and port each).
SHOWN_TARGETS = 1024


class ReplicaTarget(NamedTuple):
    """
    A client's session on a replica link, as its target names it.

    @ivar kind: C{tcp}, C{rtcp}, C{resume}, or C{ssh}.
    @ivar name: the agent.
    @ivar port: its TCP port.
    @ivar credential: what the holding replica checks: the client's API key, or for
        C{ssh} C{publickey:BLOB} or C{password:KEY}.
    @ivar client: the client's C{HOST:PORT} as the forwarding replica saw it (for an agent
        that writes PROXY headers), or L{None}.
    """

    kind: str
    name: str
    port: int
    credential: str
    client: str | None = None


def replica_tcp_target(name: str, port: int, key: str, kind: str = PLAIN,
                       client: str | None = None) -> str:
    """
    The target of a client's session (of C{kind}: C{tcp}, C{rtcp}, C{resume}, C{ssh}) to
    C{name}'s C{port} on the replica that holds it, with the client's credential (see
    L{ReplicaTarget}) and, if known, its C{HOST:PORT} after an C{@}.
    """
    if f"replica-{kind}" not in REPLICA_KINDS:
        raise ValueError(f"not a client session kind: {kind}")
    suffix = f"@{client}" if client else ""
    return f"replica-{kind}:{check_name(name)}:{check_port(port)}:{key}{suffix}"


def parse_replica_tcp_target(target: str) -> ReplicaTarget | None:
    """
    What a replica target for a client's session names; L{None} if C{target} is not one.

    @raise MessageError: a replica target that does not parse.
    """
    prefix, _, rest = target.partition(":")
    kind = REPLICA_KINDS.get(prefix)
    if kind is None:
        return None
    head, at, client = rest.partition("@")
    name, _, tail = head.partition(":")
    port, _, key = tail.partition(":")
    method, colon, secret = key.partition(":")
    if kind == SSH_CLIENT:
        good = method in SSH_METHODS and bool(colon) and bool(secret) and ":" not in secret
    else:
        good = bool(key) and not colon
    if not is_port_text(port) or not good or (at and not client):
        # Never the key itself in the message: it is a secret.
        raise MessageError(f"bad target '{prefix}:{peerText(name)}:...'")
    return ReplicaTarget(kind, check_name(name), check_port(int(port)), key, client or None)


#: A plain-HTTP visitor of a share (C{--plain-http}), on the replica link.
PLAIN_HTTP = "plain"


def plain_target(name: str, visitor: str) -> str:
    """
    The target of a visitor (C{HOST:PORT}) of the share C{name}'s plain-HTTP
    URL, its bytes as they came to the forwarding replica's HTTP port.
    """
    return f"{PLAIN_HTTP}:{check_name(name)}@{visitor}"


def parse_plain_target(target: str) -> tuple[str, str] | None:
    """
    The share and visitor of a L{plain_target}; L{None} if C{target} is not one.

    @raise MessageError: such a target with a bad name.
    """
    return parse_named_target(PLAIN_HTTP, target)


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
    C{target} with a replica client target's credential (and client address) left out:
    what a session shows once it is open (the key is a secret; it travels only in the
    OPEN).
    """
    prefix, _, rest = target.partition(":")
    if prefix not in REPLICA_KINDS:
        return target
    name, _, tail = rest.partition("@")[0].partition(":")
    return f"{prefix}:{name}:{tail.partition(':')[0]}"


@implementer(IAgentHolder)
class ReplicaHolder:
    """
    Agent C{name}, held by the replica at the other end of C{link}; sessions
    are opened for a client that logged in with C{key} (an API key), or for
    an SSH client that logged in with C{ssh} (see L{ReplicaTarget}).

    @ivar link: a replica link to the holding replica.
    @ivar since: when this holder was made (the relay clock's time).
    """

    kind = REPLICA

    def __init__(self, link: LinkProtocol, name: str, key: str | None, since: float,
                 ssh: str | None = None) -> None:
        self.link = link
        self.name = name
        self.key = key
        self.ssh = ssh
        self.since = since

    def canOpen(self) -> bool:
        """
        Whether the replica link can open a session now.
        """
        return self.link.canOpen()

    def openSession(self, target: str, protocol: Any, firstBytes: bytes = b"",
                    wantAccept: bool = False) -> LinkSession:
        """
        Open C{target} (C{tcp:PORT}, C{tcp:PORT@CLIENT}, C{rtcp:PORT},
        C{resume:PORT}, C{share:NAME@VISITOR}) at the holding replica, as the
        replica link's target for it.

        @raise LinkUnavailable: the link cannot open one now, or C{target}
            cannot be carried (a TCP session without a credential, or one
            too long for an OPEN).
        """
        if target.startswith((f"{SHARE}:", f"{PLAIN_HTTP}:")):
            if len(target.encode("utf-8")) > MAX_TARGET:
                raise LinkUnavailable("the target is too long to carry across replicas")
            return self.link.openSession(target, protocol, firstBytes, wantAccept)
        forwarded, kind, port = self._clientTarget(target)
        if len(forwarded.encode("utf-8")) > MAX_TARGET:
            raise LinkUnavailable("the client's credential is too long to carry across replicas")
        # wantAccept: the holding replica answers once the agent did.
        session = self.link.openSession(forwarded, protocol, firstBytes, wantAccept)
        session.target = shown_target(kind, self.name, port)  # what getHost() and reprs show
        return session

    def _clientTarget(self, target: str) -> tuple[str, str, int]:
        """
        The replica target for a client's C{target}, its kind and its port.
        """
        addressed = parse_addressed_target(target)
        client = None
        if addressed is not None:
            port, client = addressed
            kind = PLAIN
        else:
            resumable = parse_agent_resume_target(target)
            kind, port = resumable if resumable is not None else (PLAIN, parse_agent_target(target))
        if self.ssh is not None and kind == PLAIN:
            return (replica_tcp_target(self.name, port, self.ssh, SSH_CLIENT, client),
                    SSH_CLIENT, port)
        if self.key is None:
            raise LinkUnavailable("a TCP session across replicas needs the client's key")
        return replica_tcp_target(self.name, port, self.key, kind, client), kind, port

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
