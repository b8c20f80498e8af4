# -*- test-case-name: tests.relay.cluster.test_replica_link,tests.integration.test_replicas -*-
"""
The holding replica's side of the replica link: L{ReplicaLinkHandler} takes
the sessions another replica forwards and opens each on the local holder of
its agent or share, spliced (L{nfltr.relay.tcp_route.SessionEnd}: bytes,
credit and half-close both ways, a reset passed on with its code and words).

It decides for itself, as for a visitor of its own:

  - C{replica-tcp:<agent>:<port>:<key>}: the client's key is checked here
    (L{Relay.verifyKey}, revocations included; while the directory cannot
    answer, a key checked here before and not seen revoked since,
    L{nfltr.relay.cluster.key_cache}), then the one TCP route
    (L{Relay.tcp}) applies the ownership rule with the key's account, so
    another account's client is refused in the same words as on one relay,
    whatever the forwarding replica or a presence record said;
  - C{replica-ssh:<agent>:<port>:publickey:<blob>} (or C{password:<key>}):
    an SSH client's channel: the account is the one this replica's store
    gives the public key (the forwarding replica checked the login's
    signature) or the API key, and only ports shared without end-to-end TLS
    open, as for an SSH client of its own;
  - C{replica-rtcp:...} and C{replica-resume:...}: the same check, then the
    one TCP route's resumable sessions (L{nfltr.wire.resume}), which open
    C{rtcp:<port>} or C{resume:<port>} on the agent's link, or refuse them
    for an agent that does not resume sessions;
  - C{plain:<name>@<visitor>}: a visitor of the plain-HTTP URL of a share
    published here, served by its plain-HTTP proxy (allow list, policy and
    rate there), as a visitor of this replica's HTTP port would be;
  - C{share:<name>@<visitor>}: only a share published here (never one the
    directory says is elsewhere: no second hop), as this replica's TLS port
    would route it: e2ee and passthrough through its backend (the share's
    allow list applied to the visitor's address), inspect to the share's own
    TLS-ending HTTP proxy (allow list, policy and rate there; a share whose
    every member here withdrew is answered there too, with its 503, as on
    one relay).

The link's peer proved it is a replica of this cluster in the mutual TLS
handshake (L{nfltr.tls.ReplicaTLS}); it is trusted with the visitor's
address and with the signature of an SSH client's login (made for the
forwarding replica's SSH session), never with an account.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress

from OpenSSL import SSL
from twisted.conch.ssh import keys
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkHandler, LinkProtocol, LinkSession
from nfltr.sni.twisted import HandOver, Splice
from nfltr.store import KeyInfo, StoreUnavailable
from nfltr.tls import ssl_words
from nfltr.wire import format_address
from nfltr.wire.messages import (
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    MessageError,
    parse_share_target,
)
from nfltr.wire.resume import PLAIN

from ..agents import Relay
from ..link_handler import held_note
from ..tcp_route import AGENT_UNAVAILABLE, RouteRefused, SessionEnd
from .holder import (
    SSH_CLIENT,
    ReplicaTarget,
    parse_plain_target,
    parse_replica_tcp_target,
    shown_target,
)
from .key_cache import KeyCache

CANNOT_CHECK = "the replica that holds the agent cannot check API keys now; try again later"
#: The same for an SSH client's channel (C{ssh -L}/C{-W}), in the words of its login
#: (L{nfltr.relay.ssh._auth.STORE_UNAVAILABLE}): it logged in with a public key, or with
#: an API key as its password.
CANNOT_CHECK_SSH = "the replica that holds the agent cannot check keys now; try again later"
REPLICA_LINK_LOST = "replica link lost"


def visitor_address(text: str) -> IPv4Address | IPv6Address | None:
    """
    The address a share target names (C{HOST:PORT}, C{[V6]:PORT}), or
    L{None} if it does not parse.
    """
    host, _, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ip = ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        return IPv6Address("TCP", str(ip), number)
    return IPv4Address("TCP", str(ip), number)


class ReplicaLinkHandler(LinkHandler):
    """
    One replica link this replica accepted; see the module.
    """

    log = Logger()

    def __init__(self, relay: Relay, keys: KeyCache | None = None) -> None:
        """
        @param keys: the keys checked here, for when the directory cannot
            answer (L{nfltr.relay.cluster.key_cache}); L{None}: none kept.
        """
        self.relay = relay
        self.keys = keys
        self.link: LinkProtocol | None = None

    def linkEstablished(self, link: LinkProtocol) -> None:
        """
        A peer replica's link is up.
        """
        self.link = link
        self.log.debug("replica link from {peer}", peer=link.transport.getPeer())

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        """
        A link that ends before its hello failed its handshake, most likely
        the mutual TLS: said once a minute per source (a peer that is not a
        replica of this cluster, or a replica with another cluster CA).
        """
        if link.peerHello is not None or not reason.check(SSL.Error):
            return
        peer = link.transport.getPeer() if link.transport is not None else None
        source = str(getattr(peer, "host", "?"))
        held = self.relay.logThrottle.allow(source, "replica-tls")
        if held is not None:
            self.log.warn(
                "replica link from {peer} refused: its TLS handshake failed ({error}); a peer "
                "needs a certificate from this cluster's CA (--cluster-ca){note}",
                peer=format_address(peer) if peer is not None else "?",
                error=ssl_words(reason.value), note=held_note(held),
            )

    def sessionRequested(self, session: LinkSession) -> None:
        """
        Open a forwarded session here, or refuse it.
        """
        target = session.target
        try:
            tcp = parse_replica_tcp_target(target)
            share = None if tcp is not None else parse_share_target(target)
            plain = None if tcp or share else parse_plain_target(target)
        except MessageError as e:
            session.refuse(ErrorCode.REFUSED, str(e))
            return
        if plain is not None:
            self._plain(session, *plain)
        elif tcp is not None:
            # What getHost() and reprs show: one string per agent and port, no credential.
            session.target = shown_target(tcp.kind, tcp.name, tcp.port)
            self._tcp(session, tcp)
        elif share is not None:
            self._share(session, *share)
        else:
            session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)

    def _tcp(self, session: LinkSession, target: ReplicaTarget) -> None:
        d = self._account(target)

        def verified(account: str | None) -> None:
            if account is None:
                session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
                return
            route, kind, name, port = self.relay.tcp, target.kind, target.name, target.port
            # The forwarding replica waits for our answer (an SSH client's
            # channel): it is the agent's, once the agent accepted.
            wait = session.acceptOwed
            try:
                if kind in (PLAIN, SSH_CLIENT):
                    end = route.openTCP(account, name, port, REPLICA_LINK_LOST,
                                        plainOnly=kind == SSH_CLIENT, client=target.client,
                                        wantAccept=wait)
                else:
                    end = route.openResumable(account, kind, name, port, REPLICA_LINK_LOST)
            except RouteRefused as e:
                session.refuse(e.code, e.reason)
                return
            accepted = end.accepted if isinstance(end, SessionEnd) else None
            session.accept(end, confirm=accepted is None)
            if accepted is not None:
                # A refusal is the agent's reset, passed on by the splice.
                accepted.addCallbacks(lambda _: session.confirm(), lambda _: None)

        def failed(failure: Failure) -> None:
            self.log.debug("forwarded session: {error}", error=failure.getErrorMessage())
            session.refuse(ErrorCode.GOING_AWAY,
                           CANNOT_CHECK_SSH if target.kind == SSH_CLIENT else CANNOT_CHECK)

        d.addCallbacks(verified, failed)

    def _staleKeys(self) -> None:
        """
        Say once per outage that keys checked before it are taken.
        """
        keys = self.keys
        if keys is None or not keys.firstInOutage(self.relay.storeHealth.outages):
            return
        self.log.info(
            "the directory cannot check API keys: forwarded sessions with a key this replica "
            "checked within {limit:g} s (--presence-stale-limit) and has not seen revoked are "
            "let through; other keys are refused until it answers", limit=keys.limit)

    def _account(self, target: ReplicaTarget) -> Deferred[str | None]:
        """
        The account of the client C{target} carries, by this replica's own
        check of its credential (revocations included); L{None} for one
        that is not valid.
        """
        method, _, secret = target.credential.partition(":")
        if target.kind == SSH_CLIENT and method == "publickey":
            try:
                line = keys.Key.fromString(base64.b64decode(secret, validate=True))
                text = line.toString("OPENSSH").decode("ascii")
            except (keys.BadKeyError, ValueError, TypeError, binascii.Error):
                return succeed(None)
            return self.relay.sshKeyAccount(text)
        key = secret if target.kind == SSH_CLIENT else target.credential
        remembered = self.keys

        def account(info: KeyInfo | None, fresh: bool = True) -> str | None:
            if fresh and remembered is not None:
                remembered.remember(key, info)
            if info is None or info.revoked or self.relay.directory.isRevoked(info.keyid):
                return None
            return info.account

        def outage(failure: Failure) -> str | Failure | None:
            # The directory cannot answer: a key this replica checked lately, never revoked.
            info = None
            if remembered is not None and failure.check(StoreUnavailable):
                info = remembered.recall(key)
            if info is None:
                return failure
            self._staleKeys()
            return account(info, fresh=False)

        return self.relay.verifyKey(key).addCallbacks(account, outage)

    def _plain(self, session: LinkSession, name: str, visitor: str) -> None:
        shares = self.relay.shares
        factory = shares.plainOf(name) if shares is not None else None
        address = visitor_address(visitor)
        protocol = None
        if factory is not None and address is not None:
            session.peerAddress = address  # the visitor's, as the forwarding replica saw it
            protocol = factory.buildProtocol(address)  # None: outside the allow list
        if protocol is None:
            session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
        else:
            session.accept(protocol)

    def _share(self, session: LinkSession, name: str, visitor: str) -> None:
        route = self.relay.shares.route(name) if self.relay.shares is not None else None
        address = visitor_address(visitor)
        if address is None or not isinstance(route, Splice | HandOver):
            session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
            return
        session.peerAddress = address  # the visitor's, as the forwarding replica saw it
        if isinstance(route, HandOver):
            # inspect: this replica ends the visitor's TLS with the share's key and proxies
            # under the share's policy, as for a visitor of its own TLS port.
            protocol = route.factory.buildProtocol(address)
            if protocol is None:
                session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)  # outside the allow list
            else:
                session.accept(protocol)
            return
        visitorEnd, agentEnd = SessionEnd(REPLICA_LINK_LOST), SessionEnd("agent link lost")
        visitorEnd.other, agentEnd.other = agentEnd, visitorEnd
        # A local backend connects at once, or calls connectionLost without connecting.
        route.backend.connect(agentEnd, address)
        if not agentEnd.connected or agentEnd.closed:
            session.refuse(ErrorCode.GOING_AWAY, AGENT_UNAVAILABLE)
            return
        session.accept(visitorEnd)
