# -*- test-case-name: tests.tor.test_options,tests.integration.test_tor -*-
"""
Connections through Tor for agents and connectors (C{--tor}): to a running
tor's SOCKS port, or through a tor the process launches on its first
connection (one for all its endpoints, stopped with the reactor).  The relay's
name (an C{.onion} address, or any host) goes to tor unresolved, and the
relay's certificate is still checked above this endpoint: Tor adds anonymity,
not trust.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, DeferredLock, ensureDeferred
from twisted.internet.endpoints import clientFromString
from twisted.internet.interfaces import IStreamClientEndpoint
from zope.interface import implementer

from ._config import DEFAULT_ONION_TIMEOUT, LAUNCH
from ._control import open_tor

_MAX_PORT = 65535
_AGENT_INSTEAD = "give --tor with the SOCKS port of a tor that runs elsewhere"


class TorOptionError(ValueError):
    """
    A C{--tor} value that is not usable; the message names the option.
    """


def socks_endpoint_text(value: str) -> str:
    """
    C{--tor}'s value as an endpoint string: L{LAUNCH}, C{PORT} or C{HOST:PORT} (TCP, host
    127.0.0.1 by default), or an endpoint string (C{tcp:...}, C{unix:PATH}).

    @raise TorOptionError: none of those.
    """
    text = value.strip()
    if text.lower() == LAUNCH:
        return LAUNCH
    if text.startswith(("tcp:", "unix:")):
        try:
            clientFromString(None, text)
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise TorOptionError(f"--tor {value!r}: not a usable endpoint: {e}") from None
        return text
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 1 <= int(port) <= _MAX_PORT:
        raise TorOptionError(
            f"--tor {value!r}: give tor's SOCKS port (9050, HOST:PORT, unix:PATH) or launch"
        )
    return f"tcp:{host.strip('[]') or '127.0.0.1'}:{port}"


class TorLauncher:
    """
    The tor a process launches for its connections (C{--tor launch}): started on the first
    connection, shared by the later ones, stopped with the reactor.  Its data directory is
    a temporary one (txtorcon's).
    """

    def __init__(self, timeout: float = DEFAULT_ONION_TIMEOUT) -> None:
        self.timeout = timeout
        self._lock = DeferredLock()
        self._socks: str | None = None

    async def socks(self, reactor: Any) -> str:
        """
        The SOCKS port of the launched tor, as an endpoint string, once it bootstrapped.

        @raise TorUnavailable: tor is not installed or did not start.
        """
        await self._lock.acquire()
        try:
            if self._socks is None:
                tor = await open_tor(reactor, LAUNCH, None, self.timeout, _AGENT_INSTEAD)
                reactor.addSystemEventTrigger("before", "shutdown", tor.quit)
                listeners = await tor.protocol.get_info("net/listeners/socks")
                address = str(listeners["net/listeners/socks"]).split()[0].strip('"')
                self._socks = f"tcp:{address}"
            return self._socks
        finally:
            self._lock.release()


@implementer(IStreamClientEndpoint)
class TorEndpoint:
    """
    Connections to C{host}:C{port} through Tor: the SOCKS port C{socks} (an endpoint string
    from L{socks_endpoint_text}), or C{launcher}'s tor.
    """

    def __init__(self, reactor: Any, host: str, port: int, socks: str,
                 launcher: TorLauncher | None = None) -> None:
        self.reactor = reactor
        self.host = host
        self.port = port
        self.socks = socks
        self.launcher = launcher

    def connect(self, factory: Any) -> Deferred[Any]:
        """
        Connect through tor, then run C{factory}'s protocol.
        """
        return ensureDeferred(self._connect(factory))

    async def _connect(self, factory: Any) -> Any:
        from txtorcon import TorClientEndpoint

        spec = self.socks
        if spec == LAUNCH:
            spec = await (self.launcher or TorLauncher()).socks(self.reactor)
        socks = clientFromString(self.reactor, spec)
        endpoint = TorClientEndpoint(self.host, self.port, socks_endpoint=_Quiet(socks),
                                     reactor=self.reactor)
        return await endpoint.connect(factory)


@implementer(IStreamClientEndpoint)
class _Quiet:
    """
    The SOCKS endpoint, its factories made quiet: txtorcon's SOCKS factory would log its
    start and stop (with its Python repr) on every connection.
    """

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint

    def connect(self, factory: Any) -> Deferred[Any]:
        """
        Connect C{factory}, which logs nothing of its own.
        """
        factory.noisy = False
        result: Deferred[Any] = self.endpoint.connect(factory)
        return result
