# -*- test-case-name: tests.client.test_udp -*-
"""
C{nfltr udp-connect AGENT PORT}: a local UDP socket whose visitors'
datagrams travel, one datagram session per visitor address, to the UDP
port C{PORT} that agent C{AGENT} shares (C{udp:AGENT:PORT},
docs/link-protocol.md section 17).  It listens once the relay welcomed
it; while the link is down, datagrams are dropped (and counted), as UDP
would lose them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from twisted.application.service import Service
from twisted.internet.error import CannotListenError
from twisted.logger import Logger

from nfltr.agent import ConfigError, DiallerObserver, RelayDialler, parse_address, relay_settings
from nfltr.link import LinkConfig
from nfltr.link.twisted import LinkProtocol
from nfltr.udp import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    MAX_DATAGRAM,
    DatagramLimits,
    LinkDatagramOpener,
    UDPEntrance,
)
from nfltr.wire.messages import MessageError, check_name, client_hello, parse_port
from nfltr.wire.udp import udp_target

from ._options import DEFAULT_LISTEN, ConnectOptions

_log = Logger()
#: The longest C{--idle-timeout} (a day).
MAX_IDLE_TIMEOUT = 86400.0


def udp_connect_options(
    agent: str, port: str | int, values: Mapping[str, str | None],
    environ: Mapping[str, str] = os.environ,
) -> ConnectOptions:
    """
    Check a C{udp-connect} command line (options keyed by name: C{listen}
    and the relay's).

    @raise ConfigError: what is wrong, for the user.
    """
    try:
        check_name(agent)
        checked = parse_port(str(port))
    except MessageError as e:
        raise ConfigError(str(e)) from None
    host, listen = parse_address(
        values.get("listen") or DEFAULT_LISTEN, "--listen", default_host="127.0.0.1",
        allow_zero=True,
    )
    return ConnectOptions(agent, checked, host, listen, relay_settings(values, environ), None)


def datagram_limits(values: Mapping[str, str | None]) -> DatagramLimits:
    """
    The limits of C{udp-connect}'s senders (C{idle-timeout},
    C{max-sessions}; missing: the defaults).

    @raise ConfigError: what is wrong, for the user.
    """
    idle, count = values.get("idle-timeout"), values.get("max-sessions")
    try:
        timeout = float(idle) if idle is not None else DEFAULT_IDLE_TIMEOUT
        sessions = int(count) if count is not None else DEFAULT_MAX_SESSIONS
        if not timeout <= MAX_IDLE_TIMEOUT:
            raise ValueError(f"idle timeout {idle} is above {MAX_IDLE_TIMEOUT:g}")
        return DatagramLimits(timeout, sessions)
    except ValueError as e:
        raise ConfigError(f"--idle-timeout or --max-sessions: {e}") from None


class UDPConnector(Service, DiallerObserver):
    """
    Runs C{udp-connect}; see the module.

    @ivar link: the welcomed link to the relay, or L{None}.
    @ivar port: the listening UDP port, once listening.
    @ivar entrance: its protocol (with the visitors' L{SessionTable}).
    """

    log = Logger()

    def __init__(
        self, reactor: Any, options: ConnectOptions,
        announce: Callable[[str], None] | None = None,
        onFatal: Callable[[str], None] | None = None,
        endpoint: Any = None, limits: DatagramLimits | None = None,
    ) -> None:
        self.reactor = reactor
        self.options = options
        self.announce = announce or (lambda line: _log.info("{line}", line=line))
        self.onFatal = onFatal or (lambda message: None)
        self.link: LinkProtocol | None = None
        self.port: Any = None
        target = udp_target(options.port, options.agent)
        opener = LinkDatagramOpener(lambda: self.link, lambda address: target)
        self.entrance = UDPEntrance(opener, reactor, limits)
        relay = options.relay
        self.dialler = RelayDialler(
            endpoint or relay.endpoint(reactor), reactor, client_hello(relay.key), self,
            relay.address, LinkConfig(keepalive=relay.keepalive),
        )

    def startService(self) -> None:
        """
        Dial the relay; listening starts once it welcomed us.
        """
        super().startService()
        self.dialler.start()

    def stopService(self) -> Any:
        """
        Stop listening (ending every visitor's session) and close the link.
        """
        super().stopService()
        port, self.port = self.port, None
        if port is not None:
            port.stopListening()
        counts = self.entrance.table.counts
        self.log.info(
            "udp-connect stopping: {received} datagrams received, {forwarded} forwarded, "
            "{dropped} dropped, {returned} answers returned",
            received=counts.received, forwarded=counts.forwarded, dropped=counts.dropped,
            returned=counts.returned,
        )
        return self.dialler.stop()

    def relayUp(self, link: LinkProtocol, welcome: dict[str, Any]) -> None:
        """
        Listen, the first time.
        """
        self.link = link
        if self.port is not None or not self.running:
            return
        options = self.options
        try:
            self.port = self.reactor.listenUDP(
                options.listen_port, self.entrance, interface=options.listen_host,
                maxPacketSize=MAX_DATAGRAM,
            )
        except CannotListenError as e:
            self.onFatal(f"cannot listen on {options.listen_address}: {e.socketError}")
            self.dialler.stop()
            return
        host = options.listen_host
        shown = f"[{host}]" if ":" in host else host
        self.announce(f"listening on {shown}:{self.port.getHost().port} (UDP)")

    def relayDown(self) -> None:
        """
        The sessions end with the link; datagrams are dropped until the next.
        """
        self.link = None

    def relayFatal(self, message: str) -> None:
        """
        The relay turned us away for good.
        """
        self.onFatal(message)
