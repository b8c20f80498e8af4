# -*- test-case-name: tests.tor.test_options,tests.integration.test_tor -*-
"""
The relay's onion service (C{--onion}, docs/tor.md): its TLS port (and, with
C{--onion-ssh}, its SSH port) reached as C{ADDRESS.onion} through Tor.

The key is the relay's own (C{DATA_DIR/tor/onion-service.key},
L{nfltr.tor.load_or_create_key}), so the address is known before tor is up:
the relay certificate names it, C{--share-domain onion} makes it the share
domain, and C{relay.json} and the log say it at start.  The service is
brought up in the background once the ports listen: connect to tor's control
port (or launch a tor), C{ADD_ONION} mapping each onion port to the port
bound on this machine, wait for the descriptor's upload; nothing of it holds
up the relay's other listeners.  A failed attempt (tor missing, its control
port refusing, no bootstrap or upload within C{--onion-timeout}) is logged
in one line and tried again after L{OnionConfig.retry_delay} seconds; a lost
control connection (tor restarted) takes the service down and starts over.
C{/readyz} answers 503 while the service is not up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger

from nfltr.tor import (
    ONION_SHARE_DOMAIN,
    OnionConfig,
    OnionKey,
    PublishError,
    TorUnavailable,
    launched_tor_dir,
    load_or_create_key,
    onion_key_path,
    open_tor,
    publish,
)

from .tls_port import LOCAL_NAME

if TYPE_CHECKING:
    from .config import RelayConfig


class RelayOnion:
    """
    The relay's onion service (see the module).

    @ivar up: whether its descriptor is published and tor's control connection holds.
    @ivar problem: why it is not up, for the log; L{None} once up.
    """

    log = Logger()

    def __init__(self, config: OnionConfig, key: OnionKey, data_dir: Path, reactor: Any) -> None:
        self.config = config
        self.key = key
        self.data_dir = data_dir
        self.reactor = reactor
        self.up = False
        self.problem: str | None = "starting"
        self._running: Deferred[None] | None = None
        self._tor: Any = None

    @property
    def address(self) -> str:
        """
        C{ADDRESS.onion}.
        """
        return self.key.address

    def effective(self, relay: RelayConfig) -> RelayConfig:
        """
        C{relay} with the onion address among its names (once) (the certificate names it, and
        links to it end at the relay) and, for C{--share-domain onion}, as share domain.
        """
        domain = relay.share_domain
        names = relay.names or (LOCAL_NAME,)
        # The first name stays the one the relay used without Tor (redirects, SSH hints);
        # a second start of the service finds the address there already.
        return replace(
            relay, names=names if self.address in names else (*names, self.address),
            share_domain=self.address if domain == ONION_SHARE_DOMAIN else domain,
        )

    def start(self, ports: Sequence[tuple[int, str]]) -> None:
        """
        Bring the service up in the background, mapping each (onion port, local target).
        """
        self._running = ensureDeferred(self._run(list(ports)))
        self._running.addErrback(lambda f: f.trap(CancelledError))

    async def _run(self, ports: list[tuple[int, str]]) -> None:
        config = self.config
        while True:
            try:
                await self._attempt(ports)
            except (TorUnavailable, PublishError) as e:
                self.problem = str(e)
                self.log.error(
                    "the onion service {address} is not up: {why}; next try in {delay:g} s",
                    address=self.address, why=self.problem, delay=config.retry_delay,
                )
            await self._close()
            await deferLater(self.reactor, config.retry_delay)

    async def _attempt(self, ports: list[tuple[int, str]]) -> None:
        config = self.config
        self._tor = await open_tor(
            self.reactor, config.control, launched_tor_dir(self.data_dir), config.timeout,
        )
        protocol = self._tor.protocol
        await publish(protocol, self.key, ports, config.client_keys, self.reactor,
                      config.timeout)
        self.up, self.problem = True, None
        self.log.info(
            "onion service up: {address} (ports {ports})", address=self.address,
            ports=", ".join(str(virtual) for virtual, _ in ports),
        )
        await protocol.when_disconnected()
        self.up = False
        raise TorUnavailable("the connection to tor's control port was lost")

    async def _close(self) -> None:
        tor, self._tor = self._tor, None
        self.up = False
        if tor is not None:
            try:
                await tor.quit()
            except Exception as e:  # noqa: BLE001 - already gone: nothing more to undo
                self.log.debug("closing tor: {why}", why=str(e))

    def stop(self) -> Deferred[None]:
        """
        Stop trying and take the service down (the control connection closed; a launched
        tor stopped).
        """
        running, self._running = self._running, None
        if running is not None:
            running.cancel()
        return ensureDeferred(self._close())


def relay_onion(relay: RelayConfig, data_dir: Path, reactor: Any) -> RelayOnion | None:
    """
    The relay's onion service with its key (made on first use), or L{None} without
    C{--onion}.

    @raise OnionKeyError: the key file is unusable.
    """
    if relay.onion is None:
        return None
    key = load_or_create_key(onion_key_path(data_dir))
    return RelayOnion(relay.onion, key, data_dir, reactor)


def local_target(address: Any) -> str:
    """
    Where the onion service sends its visitors for a port bound at C{address}: loopback for
    a wildcard address, the path for a UNIX socket.
    """
    name = getattr(address, "name", None)
    if name is not None:
        return f"unix:{name.decode() if isinstance(name, bytes) else name}"
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(address.host, address.host)
    return f"[{host}]:{address.port}" if ":" in host else f"{host}:{address.port}"



def onion_info(onion: RelayOnion | None, settings: OnionConfig | None) -> dict[str, str | None]:
    """
    The C{relay.json} fields of the onion service: C{onion} (C{ADDRESS.onion:PORT} of the
    TLS port) and C{onion_ssh}; none without one.
    """
    if onion is None or settings is None:
        return {}
    ssh = None if settings.ssh_port is None else f"{onion.address}:{settings.ssh_port}"
    return {"onion": f"{onion.address}:{settings.tls_port}", "onion_ssh": ssh}
