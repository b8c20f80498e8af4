# -*- test-case-name: tests.agent.test_settings -*-
"""
How an agent or a client reaches the relay: the relay options
(C{--relay}, C{--ca}, C{--relay-pin}, C{--key}, C{--keepalive}, C{--tor}, declared
in L{nfltr.cli.agent_options}), their validation and defaults, and the
endpoint they make.

The API key comes from C{--key}, C{--key-file} or the C{NFLTR_KEY}
environment variable (L{nfltr.agent._secrets}). It is never logged:
L{RelaySettings} leaves it out of its C{repr}.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.endpoints import HostnameEndpoint

from nfltr.link import Keepalive, parse_keepalive
from nfltr.tls import (
    ClientTLS,
    InvalidFingerprint,
    PKIError,
    TLSClientEndpoint,
    TLSConfigError,
    client_creator,
    parse_fingerprint,
)
from nfltr.tor import (
    LAUNCH,
    TorEndpoint,
    TorLauncher,
    TorOptionError,
    is_onion_host,
    socks_endpoint_text,
)
from nfltr.wire.messages import is_port_text

from ._errors import ConfigError
from ._relays import RelayAddresses, ShuffledNames
from ._secrets import secret

DEFAULT_RELAY = "localhost:8443"
#: Transports to the relay: the raw link, the link in WebSocket, or the
#: first that gets through.
LINK, WEBSOCKET, AUTO = "link", "websocket", "auto"
TRANSPORTS = (AUTO, LINK, WEBSOCKET)
PROXY_ENV = ("HTTPS_PROXY", "https_proxy")
DEFAULT_KEEPALIVE = "default"
KEY_ENV = "NFLTR_KEY"
#: Addresses C{--relay} may give (replicas of one relay).
MAX_RELAYS = 16
# Seconds to wait for the relay's TCP connection (all its addresses together).
CONNECT_TIMEOUT = 10.0
_MAX_PORT = 65535


def parse_address(text: str, what: str, *, default_host: str | None = None,
                  allow_zero: bool = False) -> tuple[str, int]:
    """
    Read C{HOST:PORT} (C{[v6]:PORT} for an IPv6 address), or C{PORT} alone
    when there is a C{default_host}.

    @param what: the option, for messages.
    @raise ConfigError: not an address.
    """
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        if default_host is None:
            raise ConfigError(f"{what} {text!r}: expected HOST:PORT")
        host = default_host
    low = 0 if allow_zero else 1
    if not is_port_text(port) or not low <= int(port) <= _MAX_PORT:
        raise ConfigError(f"{what} {text!r}: the port must be a number in {low}..{_MAX_PORT}")
    return host, int(port)


@dataclass(frozen=True)
class RelaySettings:
    """
    Where the relay is, how to trust it, and the key to show it.

    @ivar creator: the TLS client connection creator, made (and the CA file
        read) once.
    """

    host: str
    port: int
    ca: str | None
    pin: str | None
    keepalive: Keepalive
    key: str = field(repr=False)
    creator: ClientTLS = field(repr=False, compare=False)
    transport: str = AUTO
    proxy: tuple[str, int] | None = None
    tor: str | None = None
    launcher: TorLauncher | None = field(default=None, repr=False, compare=False)
    #: The other addresses C{--relay} gave (replicas of one relay), each
    #: with the TLS client creator for its host name.
    others: tuple[tuple[str, int], ...] = ()
    other_creators: tuple[ClientTLS, ...] = field(default=(), repr=False, compare=False)

    @property
    def address(self) -> str:
        """
        C{HOST:PORT}, as given to C{--relay} (several, comma-separated, for
        replicas).
        """
        return ",".join(format_address(h, p) for h, p in [(self.host, self.port), *self.others])

    def trust_arguments(self) -> str:
        """
        The options that make another process trust this relay the same
        way: C{--ca FILE} or C{--relay-pin FP}.
        """
        if self.ca is not None:
            return f"--ca {self.ca}"
        return f"--relay-pin {self.pin}"

    def endpoint(self, reactor: Any, rand: random.Random | None = None) -> RelayAddresses:
        """
        An endpoint for links to the relay: TLS, through the proxy if there
        is one, raw or in WebSocket as C{transport} says; to one of the
        C{--relay} addresses at a time, taken in a shuffled order
        (L{RelayAddresses}).

        @param rand: shuffles the addresses (default: a new generator).
        """
        rand = rand or random.Random()
        addresses = [(self.host, self.port, self.creator)]
        addresses += [(h, p, c) for (h, p), c in zip(self.others, self.other_creators, strict=True)]
        return RelayAddresses(
            [(format_address(h, p), self._one(reactor, rand, h, p, c)) for h, p, c in addresses],
            rand,
        )

    def _one(self, reactor: Any, rand: random.Random, host: str, port: int,
             creator: ClientTLS) -> Any:
        """
        The endpoint to one relay address.
        """
        from nfltr.ws.client import WebSocketLinkEndpoint
        from nfltr.ws.endpoints import AutoEndpoint, ConnectProxyEndpoint

        tcp: Any
        if self.tor is not None:
            tcp = TorEndpoint(reactor, host, port, self.tor, self.launcher)
        elif self.proxy is not None:
            hop = HostnameEndpoint(reactor, self.proxy[0], self.proxy[1], timeout=CONNECT_TIMEOUT)
            tcp = ConnectProxyEndpoint(hop, host, port)
        else:
            tcp = HostnameEndpoint(ShuffledNames(reactor, rand), host, port,
                                   timeout=CONNECT_TIMEOUT)
        link = TLSClientEndpoint(creator, tcp, reactor)
        if self.transport == LINK:
            return link
        websocket = WebSocketLinkEndpoint(link, host, port, self.key, reactor)
        if self.transport == WEBSOCKET:
            return websocket
        return AutoEndpoint(link, websocket)


def relay_settings(
    values: Mapping[str, str | None], environ: Mapping[str, str] = os.environ
) -> RelaySettings:
    """
    Check the relay options (keyed by option name: C{relay}, C{ca},
    C{relay-pin}, C{key}, C{keepalive}; a missing or L{None} value takes its
    default) and read the CA file.

    @raise ConfigError: with a message that says what to give.
    """
    (host, port), *others = parse_relays(values.get("relay") or DEFAULT_RELAY)

    key = secret(values, environ, "key", KEY_ENV)
    if not key:
        raise ConfigError(
            f"an API key is required: set {KEY_ENV} (or give --key-file or --key); create one on "
            "the relay with 'nfltr keys create --account NAME'"
        )
    ca, pin = values.get("ca"), values.get("relay-pin")
    if ca is None and pin is None:
        raise ConfigError(
            "say how to trust the relay: --ca FILE (its CA certificate) or --relay-pin FP "
            "(its certificate's fingerprint); the relay prints its fingerprint at start and "
            "writes both to DATA_DIR/relay.json"
        )
    if ca is not None and pin is not None:
        raise ConfigError("give --ca or --relay-pin, not both")
    try:
        keepalive = parse_keepalive(values.get("keepalive") or DEFAULT_KEEPALIVE)
        pin = None if pin is None else parse_fingerprint(pin)
        ca = None if ca is None else os.path.abspath(ca)
        creator = client_creator(host, ca_path=ca, pin=pin, role="relay")
        creators = {host: creator}
        for other, _ in others:
            if other not in creators:
                creators[other] = client_creator(other, ca_path=ca, pin=pin, role="relay")
    except (ValueError, InvalidFingerprint, PKIError, TLSConfigError) as e:
        raise ConfigError(str(e)) from None
    transport = values.get("transport") or AUTO
    if transport not in TRANSPORTS:
        raise ConfigError(f"--transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
    proxy = values.get("proxy") or next((environ[v] for v in PROXY_ENV if environ.get(v)), None)
    tor = _tor(values.get("tor"), host, values.get("proxy"))
    return RelaySettings(
        host, port, ca, pin, keepalive, key, creator, transport,
        None if proxy is None or tor is not None else parse_proxy(proxy), tor,
        TorLauncher() if tor == LAUNCH else None, tuple(others),
        tuple(creators[other] for other, _ in others),
    )


def parse_relays(text: str, option: str = "--relay") -> list[tuple[str, int]]:
    """
    Read C{--relay} (or another C{option}): one C{HOST:PORT}, or several
    separated by commas (the replicas of one relay), at most L{MAX_RELAYS},
    none twice.

    @raise ConfigError: an address is bad, or repeated, or there are too many.
    """
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > MAX_RELAYS:
        raise ConfigError(f"{option}: at most {MAX_RELAYS} addresses, not {len(parts)}")
    addresses: list[tuple[str, int]] = []
    for part in parts:
        address = parse_address(part, option)
        if address in addresses:
            raise ConfigError(f"{option} {part!r}: given twice")
        addresses.append(address)
    return addresses


def format_address(host: str, port: int) -> str:
    """
    C{HOST:PORT} (C{[v6]:PORT} for an IPv6 address).
    """
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _tor(value: str | None, host: str, proxy: str | None) -> str | None:
    """
    C{--tor}'s SOCKS endpoint (or L{LAUNCH}); L{None} without it.

    @raise ConfigError: a bad value, C{--proxy} with it, or an onion C{host} without it.
    """
    if value is None:
        if is_onion_host(host):
            raise ConfigError(
                f"--relay {host}: an onion address is reached through Tor: give --tor "
                "(a running tor's SOCKS port, e.g. 9050, or launch)"
            )
        return None
    if proxy is not None:
        raise ConfigError("give --tor or --proxy, not both")
    try:
        return socks_endpoint_text(value)
    except TorOptionError as e:
        raise ConfigError(str(e)) from None


def parse_proxy(text: str) -> tuple[str, int]:
    """
    Read C{--proxy} (or C{HTTPS_PROXY}): C{http://HOST:PORT}.

    @raise ConfigError: not an http:// proxy URL.
    """
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() != "http":
        raise ConfigError(f"--proxy {text!r}: give an HTTP proxy as http://HOST:PORT")
    return parse_address(rest.rstrip("/"), "--proxy")


def parse_bool(text: str | bool, what: str) -> bool:
    """
    Read C{true}/C{false} (also C{yes}/C{no}, C{on}/C{off}, C{1}/C{0}).

    @raise ConfigError: anything else.
    """
    if isinstance(text, bool):
        return text
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise ConfigError(f"{what} {text!r}: expected true or false")
