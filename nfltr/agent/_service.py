# -*- test-case-name: tests.agent.test_service -*-
"""
The agent: one link to the relay (L{RelayDialler}), and for each session the
relay opens on it, a connection to the local service, spliced to the
session with backpressure both ways.

End to end by default: each session carries TLS that the agent ends itself
(L{nfltr.tls.E2EETLSProtocol}) with the key and self-signed certificate kept in its state
directory; clients pin that key's fingerprint.  With C{--e2ee false} a
session carries the service's bytes as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric import ec
from twisted.application.service import Service
from twisted.internet import defer
from twisted.logger import Logger

from nfltr.link import LinkConfig
from nfltr.link.twisted import LinkSession
from nfltr.store import OwnerLock
from nfltr.tls import (
    E2EETLSFactory,
    PKIError,
    ResumingServerTLS,
    ServerTLS,
    ensure_self_signed,
    resuming_server,
    server_context_factory,
)
from nfltr.wire.health import GROUPS_FEATURE
from nfltr.wire.messages import (
    E2EE,
    INSPECT,
    PASSTHROUGH,
    MessageError,
    agent_hello,
)

from ._dialler import DiallerObserver, RelayDialler
from ._expiry import IdleExpiry
from ._extra_links import DataLinks
from ._health import OLD_RELAY_GROUPS, service_health
from ._inspect_ui import inspect_ui_for
from ._local import ServiceConnector, free_local_ports
from ._names import agent_name, claim_name
from ._options import AgentOptions
from ._public_ports import OLD_RELAY, public_port_lines
from ._resume import AgentResumer
from ._sessions import agent_sessions
from ._settings import KEY_ENV, ConfigError
from ._shares import ShareServer, save_share_ca, share_key

if TYPE_CHECKING:
    from ._update import EntryUpdater

_log = Logger()


@dataclass(frozen=True)
class AgentSetup:
    """
    An agent's checked options and its state: its name and, end to end,
    its TLS identity.
    """

    options: AgentOptions
    name: str
    fingerprint: str | None
    server_tls: ServerTLS | ResumingServerTLS | None
    share_key: ec.EllipticCurvePrivateKey | None = None


def prepare_agent(options: AgentOptions) -> AgentSetup:
    """
    Read or create the agent's name and end-to-end key in its state
    directory.

    @raise ConfigError: the state directory cannot be used.
    """
    state = options.state_dir
    try:
        name = agent_name(state, options.name)
        key = None
        if any(option.mode == E2EE for option in options.http):
            key = share_key(state)
        if not any(share.e2ee for share in options.tcp_shares()):
            return AgentSetup(options, name, None, None, key)
        identity = ensure_self_signed(state, name)
        lifetime = options.ticket_lifetime
        tls = (resuming_server(identity.cert, identity.key, lifetime) if lifetime
               else server_context_factory(identity.cert, identity.key))
        if isinstance(tls, ResumingServerTLS) and not tls.available:
            _log.warn("TLS resumption is not available with this OpenSSL build:"
                      " every tcp-connect connection makes a full handshake")
    except (MessageError, PKIError) as e:
        raise ConfigError(str(e)) from None
    except OSError as e:
        raise ConfigError(f"cannot use the state directory {state}: {e.strerror or e}") from None
    return AgentSetup(options, name, identity.fingerprint, tls, key)


# Seconds a stopping agent lets its sessions in flight finish.
DRAIN_TIMEOUT = 30.0



class AgentService(Service, DiallerObserver):
    """
    Runs an agent: announces how to connect, keeps the link to the relay,
    serves its sessions.  Stopping drains the link: the relay opens no more
    sessions, those in flight have up to C{drainTimeout} seconds to finish,
    then the link is closed.
    """

    drainTimeout = DRAIN_TIMEOUT
    #: C{count} free local ports, for the commands shown (the OS's choice).
    freePorts: Callable[[int], list[int]] = staticmethod(free_local_ports)

    def __init__(
        self, reactor: Any, setup: AgentSetup, announce: Callable[[str], None] | None = None,
        onFatal: Callable[[str], None] | None = None, endpoint: Any = None,
        connector: Any = None, onDone: Callable[[str], None] | None = None,
    ) -> None:
        """
        @param announce: shows a line to the user (default: log it).
        @param onFatal: told the one line the agent stopped with.
        @param onDone: told why the agent ends normally (its share expired);
            it should stop the service (default: C{onFatal}).
        @param endpoint: connects to the relay (default: from the options).
        @param connector: connects to local services, stopped with the
            service (default: L{ServiceConnector}).
        """
        options = setup.options
        self.setup = setup
        self.announce = announce or (lambda line: _log.info("{line}", line=line))
        self.onFatal = onFatal or (lambda message: None)
        self.onDone = onDone or self.onFatal
        self.announced = False
        #: This agent's hold on its name in its state directory, while it runs.
        self.owner: OwnerLock | None = None
        self.expiry: IdleExpiry | None = None
        #: Applies new entries while it runs (C{nfltr up}'s reload), if set.
        self.updater: EntryUpdater | None = None
        idle = options.http[0].idle_expiry if options.http else None
        if idle is not None:
            self.expiry = IdleExpiry(reactor, idle, self._busy, self._expired)
        tls = None
        if setup.server_tls is not None:
            tls = E2EETLSFactory(setup.server_tls, False, reactor)
        connector = self.connector = connector or ServiceConnector(reactor)
        # Share URLs, each named as the agent unless it has a name (a config file's).
        self.shares: dict[str, ShareServer] = {}
        for option in options.http:
            name = option.name or setup.name
            self.shares[name] = ShareServer(name, option, connector, reactor, setup.share_key)
        self.inspectUI = inspect_ui_for(reactor, options.http, self.shares.get(setup.name),
                                      options.state_dir)
        self.sessions = agent_sessions(reactor, options, connector, tls, self.shares)
        self.udp = self.sessions.udp
        if options.resume_timeout:
            self.sessions.resumer = AgentResumer(reactor, options.resume_timeout)
        relay = options.relay
        shares = options.tcp_shares()
        http = [server.hello() for server in self.shares.values()]
        hello = agent_hello(relay.key, setup.name, shares, http, options.group)
        if self.udp is not None:
            hello["udp"] = self.udp.declaration()
        if options.resume_timeout:  # nfltr.wire.resume: the relay may open rtcp:/resume:
            hello["resume"] = True
        endpoint = endpoint or relay.endpoint(reactor)
        config = LinkConfig(keepalive=relay.keepalive)
        self.dialler = RelayDialler(endpoint, reactor, hello, self, relay.address, config)
        self.data = DataLinks(endpoint, reactor, relay.key, config, self.sessionRequested)
        for server in self.shares.values():
            server.elsewhere = self.data.elsewhere
        self.health = service_health(reactor, options, self.dialler)

    def connectLines(self) -> list[str]:
        """
        What to tell the user once the relay welcomed us: the fingerprint,
        and the command that connects to each shared port, listening on a
        port that is free now (the service's own would clash on this
        machine).
        """
        setup, options = self.setup, self.setup.options
        relay = options.relay
        common = f"--relay {relay.address} {relay.trust_arguments()}"
        udp = (self.udp.connectLines(setup.name, common, self.freePorts(len(self.udp.ports)))
               if self.udp is not None else [])
        if not options.ports:
            return udp
        plain = {share.port for share in options.tcp_shares() if not share.e2ee}
        if setup.fingerprint is not None:
            lines = [f"agent {setup.name}: end-to-end key fingerprint {setup.fingerprint}"]
            if plain:
                lines.append(f"agent {setup.name}: sessions to port(s) "
                             f"{', '.join(map(str, sorted(plain)))} are not end-to-end encrypted "
                             "(e2ee false); the relay can read them")
        else:
            lines = [
                f"agent {setup.name}: sessions are not end-to-end encrypted (--e2ee false); "
                "the relay can read them"
            ]
        ports = list(options.ports)
        for port, local in zip(ports, self.freePorts(len(ports)), strict=True):
            mode = "--e2ee false" if port in plain else f"--pin {setup.fingerprint}"
            lines.append(
                f"connect to port {port} ({KEY_ENV} set to a key of this account): "
                f"nfltr tcp-connect {setup.name} {port} --listen 127.0.0.1:{local} {mode} {common}"
            )
        return lines + udp

    def startService(self) -> None:
        """
        Dial the relay (the welcome announces how to connect).
        """
        super().startService()
        try:
            self.owner = claim_name(self.setup.options.state_dir, self.setup.name)
        except ConfigError as e:
            self.onFatal(str(e))
            return
        self.dialler.start()
        if self.expiry is not None:
            self.expiry.start()
        if self.health is not None:
            self.health[0].start()
        if self.inspectUI is not None:
            defer.ensureDeferred(self.inspectUI.start()).addCallback(self.announce)

    def stopService(self) -> defer.Deferred[None]:
        """
        Drain the link to the relay, then close it, and stop the
        connector's timer.
        """
        super().stopService()
        if self.expiry is not None:
            self.expiry.stop()
        if self.health is not None:
            self.health[0].stop()
        owner, self.owner = self.owner, None
        d = defer.gatherResults([
            self.dialler.stop(self.drainTimeout), self.data.stop(self.drainTimeout)
        ]).addCallback(lambda _: None)
        for server in self.shares.values():
            d.addBoth(_passing(server.close))
        d.addBoth(_passing(self.connector.stop))
        if self.inspectUI is not None:
            d.addBoth(_passing(self.inspectUI.stop))
        if owner is not None:
            d.addBoth(_passing(owner.release))
        return d

    def relayUp(self, link: Any, welcome: dict[str, Any]) -> None:
        """
        The relay welcomed us: the first time, say how to connect; take
        each share's URL and certificate, and show the URLs that are new.
        """
        if self.setup.options.public_ports and "public_ports" not in welcome:
            self.onFatal(OLD_RELAY)
            return
        udpRefusal = self.udp.refusal(welcome) if self.udp is not None else None
        if udpRefusal is not None:
            self.onFatal(udpRefusal)
            return
        if self.setup.options.group and GROUPS_FEATURE not in (welcome.get("features") or []):
            self.onFatal(OLD_RELAY_GROUPS)
            return
        if self.health is not None:
            self.health[1].relayUp()
        if not self.announced:
            self.announced = True
            for line in self.connectLines():
                self.announce(line)
            for line in public_port_lines(self.setup.options.relay.address, welcome):
                self.announce(line)
            if self.udp is not None:
                for line in self.udp.publicLines(self.setup.options.relay.address, welcome):
                    self.announce(line)
        self.data.welcomed(link, welcome.get("data_token"))
        if self.updater is not None:
            self.updater.relayUp()
        answers = welcome.get("shares")
        self.takeShares(answers if isinstance(answers, list) else [])
        for server in self.shares.values():
            server.relayWelcomed()

    def takeShares(self, answers: list[Any]) -> None:
        """
        Take each share's URL and certificate from the relay's answers (a
        welcome's, an update's), and show the URLs that are new.
        """
        for answer in answers:
            server = self.shares.get(str(answer.get("name"))) if isinstance(answer, dict) else None
            if server is None:
                continue
            known = server.url
            try:
                server.welcomed(answer)
            except PKIError as e:
                _log.error("share {name}: {error}", name=server.name, error=str(e))
                continue
            if server.url is not None and server.url != known:
                self._announceShare(server, answer)

    def _announceShare(self, server: ShareServer, answer: dict[str, Any]) -> None:
        mode = server.option.mode
        how = {
            E2EE: "TLS ends here; the relay forwards ciphertext only",
            INSPECT: "the relay ends TLS and reads the HTTP",
            PASSTHROUGH: "the service on port {port} ends TLS itself",
        }[mode].format(port=server.option.port)
        # e2ee: the chain the relay signed (its share CA last); inspect: the
        # CA of the certificate the relay serves, or the operator's --cert.
        # Saved before the URL is printed, for whoever waits for the URL.
        chain = answer.get("cert") if mode == E2EE else answer.get("ca")
        state = self.setup.options.state_dir
        path = save_share_ca(state, chain) if isinstance(chain, str) else None
        self.announce(f"share {server.url} -> port {server.option.port} ({mode}: {how})")
        plain = answer.get("plain_url")
        if isinstance(plain, str):
            self.announce(f"share {plain} -> port {server.option.port} (plain HTTP: the relay "
                          "reads it)")
        if isinstance(chain, str):
            if path is not None:
                self.announce(
                    f"visitors trust the relay's share CA: curl --cacert {path} {server.url}"
                )
        elif mode == INSPECT and answer.get("operator_cert") is True:
            self.announce(
                "visitors trust it as they trust the relay's own certificate (its --cert)"
            )

    def sessionRequested(self, session: LinkSession) -> None:
        """
        A session from the relay: serve it.
        """
        if self.expiry is not None:
            self.expiry.touched()
        self.sessions.sessionRequested(session)
        self.data.sessionStarted()

    def relayDown(self) -> None:
        """
        The first link is gone or going away: so are the data connections.
        """
        self.data.primaryDown(self.drainTimeout)

    def _busy(self) -> bool:
        link = self.dialler.link
        return link is not None and link.connection is not None and bool(
            link.connection.session_count
        )

    def _expired(self) -> None:
        assert self.expiry is not None
        idle = self.expiry.idle
        self.onDone(f"share expired: no visitor for {idle:g}s (--idle-expiry)")

    def relayFatal(self, message: str) -> None:
        """
        The relay turned us away for good.
        """
        self.onFatal(message)

    def relayControl(self, link: Any, message: dict[str, Any]) -> None:
        """
        The relay's answer to an update of our entries (L{updater}).
        """
        if self.updater is not None:
            self.updater.controlReceived(message)



def _passing(call: Callable[[], object]) -> Callable[[Any], Any]:
    def run(result: Any) -> Any:
        call()
        return result

    return run

