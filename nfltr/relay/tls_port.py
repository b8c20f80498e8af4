# -*- test-case-name: tests.relay.test_tls_port -*-
"""
What the relay's TLS port does with each server name.

Every connection to the TLS port goes through an L{nfltr.sni.twisted.SNIRouter}
first; L{TLSPortRoutes.choose} decides by the ClientHello's server name:

  - none (a client that dialled an IP address sends none), C{localhost} or
    one of the relay's own names (C{--name}): the relay ends TLS itself
    (L{HandOver} to its TLS stack, then links and HTTP as before);
  - C{LABEL.SHARE_DOMAIN} (C{--share-domain}, C{localhost} by default) for
    a share the routing table knows: the raw bytes go to the share's backend
    (L{Splice});
  - anything else, an unknown share included: a fatal TLS
    C{unrecognized_name} alert.

The relay's own names win over the share domain, so C{relay.example.com}
stays the relay's with C{--share-domain example.com}.

The routing table is an L{IShareRoutes} (L{nfltr.relay.interfaces}): the relay's
L{nfltr.relay.shares.ShareRegistry} (shares agents publish), or a fixed
L{nfltr.relay.share_routes.ShareRoutes} table in memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from cryptography import x509
from twisted.internet import interfaces

from nfltr.link import LISTENER
from nfltr.link.memory import LinkMemory
from nfltr.link.twisted import LinkFactory
from nfltr.sni import ClientHello, ClientHelloError, check_host_name
from nfltr.sni.twisted import (
    REFUSE,
    HandOver,
    Route,
    SNIRouterFactory,
)
from nfltr.tls import PKIError, subject_alt_names, tls_factory
from nfltr.ws.lazy import relay_websocket_factory

from ._sniff import SniffingFactory
from .config import RelayConfig
from .interfaces import IShareRoutes
from .link_handler import RelayLinkHandler

if TYPE_CHECKING:
    from .agents import Relay

#: The name the relay always answers to, as its certificate does.
LOCAL_NAME = "localhost"


def own_names(names: Iterable[str]) -> frozenset[str]:
    """
    The server names the relay ends TLS for: C{localhost} and the DNS names
    among C{names} (the C{--name} values), spelled as a ClientHello carries
    them (lowercase, no trailing dot, C{xn--} A-labels).  IP addresses and
    wildcards are left out: neither can be a server name.

    @raise PKIError: a name is neither a DNS name nor an IP address.
    """
    result = {LOCAL_NAME}
    for entry in subject_alt_names(names):
        if isinstance(entry, x509.DNSName) and not entry.value.startswith("*."):
            result.add(entry.value)
    return frozenset(result)


def check_share_domain(domain: str) -> str:
    """
    Check and normalise a share domain: a DNS host name under which each
    share is one more label.

    @return: the domain as server names spell it (lowercase, no trailing
        dot, C{xn--} A-labels).
    @raise ValueError: saying what is wrong.
    """
    try:
        [entry] = subject_alt_names([domain])
    except PKIError:
        entry = None
    if not isinstance(entry, x509.DNSName) or entry.value.startswith("*."):
        raise ValueError(f"{domain!r}: give a DNS name (not an IP address, not a wildcard)")
    try:
        return check_host_name(entry.value.encode("ascii"))
    except ClientHelloError as e:
        raise ValueError(f"{domain!r}: {e.detail}") from None


class TLSPortRoutes:
    """
    Chooses the route of each connection to the TLS port from its hello.

    @ivar relay: the factory of the relay's own TLS stack.
    @ivar own: the names the relay ends TLS for (see L{own_names}).
    @ivar shareDomain: the share domain, normalised (L{check_share_domain}).
    @ivar shares: the routing table.
    """

    def __init__(
        self, relay: interfaces.IProtocolFactory, own: frozenset[str], shareDomain: str,
        shares: IShareRoutes,
    ) -> None:
        self.relay = relay
        self.own = own
        self.shareDomain = shareDomain
        self.shares = shares
        self._suffix = "." + shareDomain

    def shareName(self, serverName: str) -> str | None:
        """
        The share name in C{serverName}: its first label if the rest is the
        share domain; L{None} otherwise (a deeper name included).
        """
        if not serverName.endswith(self._suffix):
            return None
        label = serverName[: -len(self._suffix)]
        return label if label and "." not in label else None

    def choose(self, hello: ClientHello) -> Route:
        """
        The route for C{hello}: see the module.
        """
        name = hello.server_name
        if name is None or name in self.own:
            return HandOver(self.relay)
        share = self.shareName(name)
        route = None if share is None else self.shares.route(share)
        return REFUSE if route is None else route


def tls_port_factory(
    relay: Relay, creator: Any, config: RelayConfig, shares: IShareRoutes,
    clock: interfaces.IReactorTime, memory: LinkMemory | None = None,
) -> SNIRouterFactory:
    """
    The factory of the relay's TLS port: an SNI router (with C{config}'s
    names, share domain and handshake timeout, and the routing table
    C{shares}) in front of the relay's own TLS stack: TLS with C{creator}
    (an L{IOpenSSLServerConnectionCreator}), then link or HTTP 400
    (L{nfltr.relay._sniff}, under the same timeout), links handled by
    C{relay}, raw or over WebSocket, all reporting to C{memory}.

    @raise ValueError: the share domain is not a DNS name.
    """
    links = LinkFactory(LISTENER, partial(RelayLinkHandler, relay), clock, memory=memory)
    links.noisy = False
    websocket = relay_websocket_factory(links, relay.checkKey, clock, config.ws_echo)
    sniffing = SniffingFactory(links, clock, config.handshake_timeout, websocket)
    tls = tls_factory(creator, False, sniffing, clock)
    routes = TLSPortRoutes(
        tls, own_names(config.names), check_share_domain(config.share_domain), shares
    )
    return SNIRouterFactory(routes.choose, clock, config.handshake_timeout)
