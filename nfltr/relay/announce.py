# -*- test-case-name: tests.relay.test_service -*-
"""
What a relay that listens says about itself: L{describe} makes its
L{RelayInfo} (the addresses it bound, its CA files and fingerprint, for
C{relay.json} and C{nfltr relay}'s output), L{announce} logs it for the
operator, once, at start.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.logger import Logger

from nfltr import __version__
from nfltr.tls import RelayPKI
from nfltr.wire import format_address

from .certs import RelayCertificate
from .config import RelayConfig
from .onion import RelayOnion, onion_info
from .proxy_front import describe_trusted
from .relay_json import RelayInfo


def describe(  # noqa: PLR0913 -- the listeners the relay bound, each its own
    config: RelayConfig, pki: RelayPKI, certificate: RelayCertificate | None,
    onion: RelayOnion | None, tlsPort: Any, *, adminPort: Any, httpPort: Any,
    sshPort: Any = None,
) -> RelayInfo:
    """
    The relay's information, once it listens.
    """
    return RelayInfo(
        ssh=None if sshPort is None else format_address(sshPort.getHost()),
        tls=format_address(tlsPort.getHost()),
        admin=format_address(adminPort.getHost()),
        http=None if httpPort is None else format_address(httpPort.getHost()),
        share_ca=str(pki.share_ca_cert),
        ca=str(pki.ca_cert),
        fingerprint=certificate.fingerprint if certificate else pki.fingerprint,
        **onion_info(onion, config.onion),
        pid=os.getpid(),
        version=__version__,
    )


def announce(log: Logger, config: RelayConfig, info: RelayInfo, sharePort: Any) -> None:
    """
    Log where the relay listens and how to trust it.
    """
    log.info(
        "relay listening: links (TLS) on {tls}, admin on {admin} (dashboard: "
        "http://{admin}/dashboard, API: /api/v1/, with a token from nfltr admin token "
        "create)", tls=info.tls, admin=info.admin,
    )
    if info.http is not None:
        log.info("HTTP port on {http} redirects to HTTPS", http=info.http)
    if info.onion is not None:
        log.info("onion service {onion} (up once tor published it: /readyz)", onion=info.onion)
    if info.ssh is not None:
        log.info("SSH port on {ssh}: ssh -R publishes, ssh -L reaches (keys: nfltr keys "
                 "add-ssh)", ssh=info.ssh)
    if config.proxy_from:
        log.info("connections from {networks} start with a PROXY protocol header "
                 "naming the client (--proxy-protocol-from)",
                 networks=describe_trusted(config.proxy_from))
    log.info(
        "share URLs: https://NAME.{domain}:{port}/; visitors trust the share CA {ca}",
        domain=config.share_domain, port=sharePort, ca=info.share_ca,
    )
    log.info(
        "relay certificate fingerprint {fingerprint}: agents and clients trust this relay "
        "with --ca {ca} or --relay-pin {fingerprint}",
        fingerprint=info.fingerprint, ca=info.ca,
    )
    if config.ws_echo is not None:
        log.warn("a WebSocket echo answers on {path}: for conformance tests only, never in "
                 "production (--ws-echo)", path=config.ws_echo)
