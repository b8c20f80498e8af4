# -*- test-case-name: tests.agent.test_shares -*-
"""
The agent's share URLs (C{nfltr http PORT}): what it asks the relay for, and
how it serves each visitor session (C{share:NAME@VISITOR}) by the share's
mode:

  - C{e2ee}: the agent ends the visitor's TLS with its share key (kept in
    the state directory, never sent) and the certificate the relay's share
    CA signed from its request, then proxies HTTP/1.1 to the service
    (L{nfltr.http}) through a pool of reused connections, checking each
    request against the share's policy (an open one refuses duplicate
    credential headers) and setting the forwarding headers
    (C{X-Forwarded-For}, C{Forwarded}, ...) in place of the visitor's;
  - C{inspect}: the relay ended TLS, checked the policy and set those
    headers; the agent proxies HTTP the same way, keeping them (sessions
    C{http:NAME}, as for a share served in plain HTTP on the relay's HTTP
    port with C{--plain-http});
  - C{passthrough}: the visitor's TLS bytes go to the service as they are
    (it holds its own certificate), one connection each.

The proxy rewrites C{Host} to C{localhost:PORT} by default, the name a
development server expects (C{--host-header rewrite}); C{preserve} keeps the
visitor's, any other value is sent as given.  The visitor's is kept in
C{X-Forwarded-Host}.  Once the relay gave the share's URL, a request naming
another host than the share's gets 421.

A share that a reload removed or changed retires (L{ShareServer.retire}):
its visitor connections end at a response's end, and those left after the
agent's drain timeout are reset (L{ShareServer.close}).

The HTTP proxy (and h11) is imported by the first share that proxies, not
by every agent: C{nfltr tcp} never holds it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric import ec
from twisted.internet import defer
from twisted.logger import Logger

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkSession
from nfltr.tls import (
    E2EETLSFactory,
    PKIError,
    load_share_key,
    locked_directory,
    server_tls_from_pem,
    share_request,
    write_atomically,
)
from nfltr.wire.constants import PASSTHROUGH_NO_CREDENTIALS
from nfltr.wire.h2limits import DEFAULT_H2_LIMITS, H2Limits
from nfltr.wire.messages import (
    E2EE,
    INSPECT,
    MODES,
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    OPEN,
    PASSTHROUGH,
    HttpShare,
)
from nfltr.wire.policy import SharePolicy, visitor_ip

from ._local import splice_local
from ._proxy import header_writer
from ._settings import ConfigError
from ._visits import Visits

if TYPE_CHECKING:
    from nfltr.http import BackendPool, HTTPProxyFactory, IDrainable

REWRITE, PRESERVE = "rewrite", "preserve"
#: C{--service-protocol}: HTTP/1.1, or HTTP/2 in cleartext with prior knowledge.
HTTP1, H2C = "http1", "h2c"
SHARE_KEY_FILE = "share.key"
SHARE_CA_FILE = "share-ca.crt"
_HOST = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")
_PEM_END = "-----END CERTIFICATE-----"


@dataclass(frozen=True)
class HttpOption:
    """
    A share URL to publish: the service's port, the mode, the C{Host}
    header the service gets (L{REWRITE}, L{PRESERVE} or a value), and
    whether the relay's HTTP port serves it in plain HTTP too.

    @ivar name: the share's name; L{None}: the agent's (C{nfltr http}).
    """

    port: int
    mode: str = E2EE
    host_header: str = REWRITE
    plain: bool = False
    policy: SharePolicy = OPEN
    idle_expiry: float | None = None
    proxy_protocol: str | None = None
    #: Where the request inspector listens (L{nfltr.agent._inspect_ui}); L{None}: off.
    inspect_ui: tuple[str, int] | None = None
    #: What it keeps: requests, and bytes of each body (L{nfltr.agent._inspect_ui}).
    inspect_keep: tuple[int, int] = (100, 16 * 1024)
    name: str | None = None
    #: What the proxy speaks to the service: L{HTTP1} or L{H2C}.
    service_protocol: str = HTTP1
    #: HTTP/2's limits where the agent ends TLS (e2ee).
    h2_limits: H2Limits = DEFAULT_H2_LIMITS

    def host(self) -> bytes | None:
        """
        The C{Host} value to send, or L{None} to keep the visitor's.
        """
        if self.host_header == PRESERVE:
            return None
        if self.host_header == REWRITE:
            return f"localhost:{self.port}".encode("ascii")
        return self.host_header.encode("ascii")


def check_http_option(
    port: int, mode: str | None, host_header: str | None, plain: bool = False,
    service_protocol: str | None = None,
) -> HttpOption:
    """
    Check C{--mode}, C{--host-header}, C{--plain-http} and
    C{--service-protocol}.

    @raise ConfigError: what is wrong.
    """
    protocol = service_protocol or HTTP1
    if protocol not in (HTTP1, H2C):
        raise ConfigError(f"--service-protocol {protocol!r}: use {HTTP1} or {H2C}")
    if protocol == H2C and mode == PASSTHROUGH:
        raise ConfigError(
            "--service-protocol h2c: not for passthrough (the service ends TLS and chooses "
            "the protocol with the visitor itself)")
    if protocol == H2C and plain:
        raise ConfigError("--service-protocol h2c: not with --plain-http (its visitors speak "
                          "HTTP/1.1)")
    mode = mode or E2EE
    if mode not in MODES:
        raise ConfigError(f"--mode {mode!r}: use one of {', '.join(MODES)}")
    host = host_header or REWRITE
    if host not in (REWRITE, PRESERVE) and not _HOST.fullmatch(host):
        raise ConfigError(
            f"--host-header {host!r}: give rewrite, preserve, or a HOST[:PORT] to send"
        )
    if mode not in (E2EE, INSPECT) and host_header is not None:
        raise ConfigError(f"--host-header: a {mode} share's HTTP is not read by the agent")
    if plain and mode == PASSTHROUGH:
        raise ConfigError("--plain-http: a passthrough share's service speaks TLS only")
    return HttpOption(port, mode, host, plain, service_protocol=protocol)


def check_policy(option: HttpOption, policy: SharePolicy) -> HttpOption:
    """
    Attach C{policy} to C{option}, refusing credentials on a passthrough
    share (nobody but the service reads its requests).

    @raise ConfigError: saying why.
    """
    if policy.credentials and option.mode == PASSTHROUGH:
        raise ConfigError(
            f"--basic-auth, --bearer and --require-header: {PASSTHROUGH_NO_CREDENTIALS}. "
            "Use --mode e2ee, or check credentials in the service"
        )
    return replace(option, policy=policy)


def share_key(state_dir: Path) -> ec.EllipticCurvePrivateKey:
    """
    The agent's share key (C{STATE_DIR/share.key}, made on first use).

    @raise ConfigError: it cannot be read or made.
    """
    try:
        with locked_directory(state_dir):
            return load_share_key(state_dir / SHARE_KEY_FILE)
    except PKIError as e:
        raise ConfigError(str(e)) from None


class ShareServer:
    """
    Serves the visitor sessions of one share.

    @ivar tls: ends visitors' TLS (e2ee), once the relay sent the
        certificate.
    @ivar url: the share's URL, once the relay welcomed it.
    @ivar visits: the visitor sessions it serves (L{retire} drains them,
        L{close} ends them).
    """

    log = Logger()

    def __init__(
        self, name: str, option: HttpOption, connector: Any, reactor: Any,
        key: ec.EllipticCurvePrivateKey | None,
    ) -> None:
        self.name = name
        self.option = option
        self.connector = connector
        self.reactor = reactor
        self.key = key
        self.tls: E2EETLSFactory | None = None
        self.url: str | None = None
        self.pool: BackendPool | None = None
        self.proxy: HTTPProxyFactory | None = None
        #: Whether the agent holds a welcomed link to another relay than the one a link (of
        #: the agent's) reaches (the agent sets it: L{nfltr.agent._extra_links.DataLinks}).
        self.elsewhere: Callable[[Any], bool] = lambda link: False
        # The visitor connections whose relay goes away, with their links, until elsewhere.
        self._toDrain: list[tuple[IDrainable, Any]] = []
        self.relayed: HTTPProxyFactory | None = None
        self.visits = Visits()
        if option.mode in (E2EE, INSPECT):
            from nfltr.http import BackendPool, HTTPProxyFactory

            self.pool = BackendPool(_PortBackend(connector, option.port), reactor)
            # In e2ee the agent is the only hop that reads requests: it checks
            # them (an open policy too: it refuses duplicate credentials).
            policy = replace(option.policy, realm=name)
            gate = policy.gate if option.mode == E2EE else None
            self.proxy = HTTPProxyFactory(
                self.pool, reactor, host=option.host(), forwarded=option.mode == E2EE, gate=gate,
                h2=option.mode == E2EE, h2c=option.mode == E2EE and option.service_protocol == H2C,
                h2limits=option.h2_limits,
            )
            # Sessions of the relay's own proxy: the relay added the visitor headers.
            self.relayed = HTTPProxyFactory(
                self.pool, reactor, host=option.host(), forwarded=False
            )

    def hello(self) -> HttpShare:
        """
        The share as the hello declares it (with a fresh signing request).
        """
        option = self.option
        csr = None
        if option.mode == E2EE:
            assert self.key is not None
            csr = share_request(self.key, self.name)
        # The credentials' digests go to the relay only where it checks them.
        relayChecks = option.mode == INSPECT or option.plain
        policy = option.policy if relayChecks else option.policy.without_secrets()
        h2c = None
        if option.mode == INSPECT and option.service_protocol == H2C:
            h2c = (option.host() or b"").decode("ascii")  # the relay sends it as :authority
        return HttpShare(
            self.name, option.port, option.mode, csr, option.plain, policy,
            option.policy.kinds, agent_enforces=option.mode == E2EE,
            addressed=option.proxy_protocol is not None, h2c_host=h2c,
        )

    def welcomed(self, answer: dict[str, Any]) -> None:
        """
        The relay published the share: keep its URL and (e2ee) certificate.

        @raise PKIError: the certificate does not fit the key.
        """
        url = answer.get("url")
        self.url = url if isinstance(url, str) else None
        host = urlsplit(self.url).hostname if self.url is not None else None
        # Requests for another name than the share's get 421 (the relay's
        # proxy checked them already in inspect; checking again costs nothing).
        for proxy in (self.proxy, self.relayed):
            if proxy is not None and host:
                proxy.hosts = [host]
        cert = answer.get("cert")
        if self.option.mode == E2EE and isinstance(cert, str) and self.key is not None:
            self.tls = E2EETLSFactory(server_tls_from_pem(self.key, cert), False, self.reactor)

    def relayWelcomed(self) -> None:
        """
        A new link to the relay was welcomed: the visitor connections whose relay went away
        may end now (L{_drainElsewhere}).
        """
        waiting, self._toDrain = self._toDrain, []
        for proxy, link in waiting:
            self._drainElsewhere(proxy, link)

    def _drainElsewhere(self, proxy: IDrainable, link: Any) -> None:
        """
        The relay that carries C{proxy}'s visitor connection over C{link} drains (a GOAWAY: a
        successor took its sockets, say): end the connection at a response's end
        (L{IDrainable}) so the visitor connects again without an error, but only once the
        agent's first link is welcomed by another relay (now, if it is), or the visitor would
        meet a relay without the agent.  Until then it stays (the draining relay's drain
        timeout bounds it).  A GOAWAY on a data link may come before or after the first
        link's, and a session on it may start after the next welcome.
        """
        if self.elsewhere(link):
            proxy.drain()
        else:
            self._toDrain.append((proxy, link))

    def serve(self, session: LinkSession, visitor: str) -> None:
        """
        Serve one visitor's session.
        """
        mode = self.option.mode
        if not self.option.policy.allows(visitor_ip(visitor)) and visitor:
            session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
            return
        if mode == E2EE:
            if self.tls is None or self.proxy is None:
                session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
                return
            proxy = self.proxy.proxyFor(visitor or None, self._visitorBackend(visitor))
            session.accept(self.tls.wrap(proxy))
            self.visits.add(session, proxy)
            session.whenLinkGoesAway(lambda: self._drainElsewhere(proxy, session.link))
        elif mode == INSPECT:
            self.serveRelayed(session)
        else:
            self._splice(session, visitor)

    def _splice(self, session: LinkSession, visitor: str | None) -> None:
        """
        The session's bytes to and from a connection to the service of its
        own, as they are (with a PROXY header first if the share writes
        them).
        """
        local, remote = splice_local()
        local.header = header_writer(self.option.proxy_protocol, visitor)
        session.accept(remote)
        self.visits.add(session)
        d = self.connector.connect(self.option.port, local)
        remote.onLost = lambda reason: d.cancel()
        d.addErrback(self._failed, session)

    def serveRelayed(self, session: LinkSession, visitor: str | None = None) -> None:
        """
        Serve a session of the relay's HTTP proxy (C{http:NAME}, or
        C{http:NAME@VISITOR} for an agent that writes PROXY headers): an
        C{inspect} share's, or a plain-HTTP one's if the share asked for it.
        """
        if self.relayed is None or not (self.option.mode == INSPECT or self.option.plain):
            session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
            return
        if self.option.service_protocol == H2C:
            # The relay speaks h2c in it (the hello said so): the service's own.
            self._splice(session, visitor)
            return
        proxy = self.relayed.proxyFor(None, self._visitorBackend(visitor))
        session.accept(proxy)
        self.visits.add(session, proxy)
        session.whenLinkGoesAway(lambda: self._drainElsewhere(proxy, session.link))

    def _visitorBackend(self, visitor: str | None) -> _PortBackend | None:
        """
        With C{--proxy-protocol}, the backend of one visitor's connection:
        connections of its own to the service, each starting with a header
        naming C{visitor}; without, none (the shared pool serves).
        """
        if self.option.proxy_protocol is None:
            return None
        header = header_writer(self.option.proxy_protocol, visitor)
        return _PortBackend(self.connector, self.option.port, header)

    def _failed(self, failure: Any, session: LinkSession) -> None:
        if failure.check(defer.CancelledError):
            return
        self.log.debug(
            "share {name}: cannot reach the service on port {port}: {why}",
            name=self.name, port=self.option.port, why=failure.getErrorMessage(),
        )
        session.abortWith(ErrorCode.CONNECT_FAILED, f"service on port {self.option.port} is down")

    def retire(self) -> None:
        """
        A reload removed or changed the share (the router sends it no new
        session): each HTTP visitor connection ends at its next response's
        end (L{IDrainable}: the visitor connects again, to the new share or
        to none), the shared h2c connections once their streams are done,
        the pool's idle connections now and the others as they are given
        back.  Splices (passthrough) go on.  L{close} ends what is left.
        """
        for proxy in (self.proxy, self.relayed):
            if proxy is not None:
                proxy.retire()
        if self.pool is not None:
            self.pool.close()
        self.visits.drain()

    def close(self) -> None:
        """
        Reset the visitor sessions still open, and close the connections
        to the service.
        """
        self.visits.abort()
        if self.pool is not None:
            self.pool.close()
        if self.proxy is not None:
            self.proxy.close()


class _PortBackend:
    """
    The local service on one port, for the proxy's pool.
    """

    def __init__(
        self, connector: Any, port: int, header: Callable[[Any], bytes] | None = None,
    ) -> None:
        self.connector = connector
        self.port = port
        self.header = header

    def connect(self, protocol: Any) -> defer.Deferred[Any]:
        """
        Connect C{protocol} to the service; with a C{header} (a PROXY
        protocol header's writer), write it first, before the proxy's
        request.
        """
        result: defer.Deferred[Any] = self.connector.connect(self.port, protocol)
        header = self.header
        if header is not None:

            def first(connected: Any) -> Any:
                transport = protocol.transport
                transport.write(header(transport.getPeer()))
                return connected

            result.addCallback(first)
        return result


def save_share_ca(state_dir: Path, chain: str) -> Path | None:
    """
    Write the last certificate of C{chain} (the relay's share CA) to
    C{STATE_DIR/share-ca.crt}, for visitors' C{--cacert}.
    """
    parts = [p for p in chain.split(_PEM_END) if p.strip()]
    if not parts:
        return None
    path = state_dir / SHARE_CA_FILE
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # inspect made no key there
        write_atomically(path, (parts[-1].strip() + "\n" + _PEM_END + "\n").encode(), 0o644)
    except OSError:
        return None
    return path
