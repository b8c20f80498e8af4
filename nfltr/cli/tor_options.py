# -*- test-case-name: tests.tor.test_options -*-
"""
The relay's Tor options (docs/tor.md): rows of L{nfltr.cli.relay_options}'s
table, and the L{OnionConfig} they make.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from twisted.internet.endpoints import clientFromString
from twisted.python import usage

from nfltr.cli.options import Option
from nfltr.tor import (
    DEFAULT_ONION_TIMEOUT,
    LAUNCH,
    ONION_SHARE_DOMAIN,
    OnionConfig,
    OnionKeyError,
    read_client_keys,
)

#: The longest --onion-timeout.
MAX_ONION_TIMEOUT = 3600.0
_MAX_PORT = 65535
#: What C{--tls onion:...} (txtorcon's endpoint string) is told: the relay's own onion
#: service keeps its key, knows its address before tor is up, and does not hold up the
#: other listeners while tor bootstraps.
ONION_ENDPOINT_HINT = (
    "for an onion service keep a local endpoint here and add --onion PORT (--onion-ssh PORT "
    "for the SSH port): the relay keeps the key in its data directory (docs/tor.md)"
)


def _port(value: object, option: str) -> int | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= _MAX_PORT:
        raise usage.UsageError(f"{option} {value}: give a port, 1..{_MAX_PORT}")
    return int(text)


def _control(value: str, option: str) -> str:
    text = value.strip()
    if text.lower() == LAUNCH:
        return LAUNCH
    try:
        clientFromString(None, text)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise usage.UsageError(
            f"{option} {value!r}: give tor's control port as an endpoint (tcp:127.0.0.1:9051, "
            f"unix:/run/tor/control) or launch: {e}"
        ) from None
    return text


def _timeout(value: object, option: str) -> float:
    try:
        number = float(str(value))
    except ValueError:
        number = float("nan")
    if not 0 < number <= MAX_ONION_TIMEOUT:  # NaN fails too
        raise usage.UsageError(
            f"{option} {value}: give seconds, more than 0 and at most {MAX_ONION_TIMEOUT:g}"
        )
    return number


def _clientKeys(value: str | None, option: str) -> tuple[str, ...]:
    if value is None:
        return ()
    try:
        return read_client_keys(Path(value))
    except OnionKeyError as e:
        raise usage.UsageError(f"{option}: {e}") from None


TOR_RELAY_OPTIONS: tuple[Option, ...] = (
    Option("onion", None,
           "Also serve the TLS port as a Tor onion service on this port (e.g. 443); its key is "
           "kept in DATA_DIR/tor/, so the .onion address survives restarts (docs/tor.md).",
           parse=_port),
    Option("onion-ssh", None, "Serve the SSH port (--ssh) on the onion service too, on this port.",
           parse=_port),
    Option("tor-control", None,
           "The tor that publishes the onion service: its control port as an endpoint "
           "(tcp:127.0.0.1:9051, unix:/run/tor/control), or launch to start one in DATA_DIR/tor/.",
           LAUNCH, parse=_control),
    Option("onion-timeout", None,
           "Seconds tor has to start, bootstrap and publish the onion service before the "
           "attempt is logged as failed and tried again.", str(DEFAULT_ONION_TIMEOUT),
           parse=_timeout),
    Option("onion-client-keys", None,
           "Only clients with one of the keys in this file find the onion service (v3 client "
           "authorization): one x25519 public key a line, descriptor:x25519:BASE32.",
           parse=_clientKeys),
)

def onion_config(values: Mapping[str, Any]) -> OnionConfig | None:
    """
    The onion service of the parsed C{values}, or L{None} without C{--onion}.

    @raise usage.UsageError: an option that needs C{--onion} (or C{--ssh}) without it.
    """
    port = values["onion"]
    if port is None:
        for option in ("onion-ssh", "onion-client-keys"):
            if values[option]:
                raise usage.UsageError(f"--{option} needs --onion PORT")
        if values["share-domain"] == ONION_SHARE_DOMAIN:
            raise usage.UsageError("--share-domain onion needs --onion PORT")
        return None
    if values["onion-ssh"] is not None and values["ssh"] is None:
        raise usage.UsageError("--onion-ssh needs an SSH port (--ssh)")
    return OnionConfig(
        tls_port=port, ssh_port=values["onion-ssh"], control=values["tor-control"],
        timeout=values["onion-timeout"], client_keys=values["onion-client-keys"],
    )
