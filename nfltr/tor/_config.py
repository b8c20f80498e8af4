# -*- test-case-name: tests.tor.test_options -*-
"""
What a relay's onion service is made of (C{--onion}, C{--onion-ssh},
C{--tor-control}, C{--onion-timeout}, C{--onion-client-keys}), and where its
key is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: C{--tor-control launch}: nfltr starts a tor of its own (txtorcon.launch).
LAUNCH = "launch"
#: Seconds tor has to start (or answer on its control port), bootstrap and publish the
#: onion service's descriptor before the attempt counts as failed and is retried.
DEFAULT_ONION_TIMEOUT = 300.0
#: Seconds between two attempts to bring the onion service up.
ONION_RETRY_DELAY = 30.0
#: The relay's tor files in its data directory: the onion key, and the data directory of
#: the tor it launches.
TOR_DIR = "tor"
ONION_KEY_FILE = "onion-service.key"
LAUNCHED_TOR_DIR = "launched"
#: C{--share-domain onion}: the share domain is the relay's onion address.
ONION_SHARE_DOMAIN = "onion"


@dataclass(frozen=True)
class OnionConfig:
    """
    The relay's onion service.

    @ivar tls_port: the onion service's port that reaches the relay's TLS port (links, and
        share URLs by server name).
    @ivar ssh_port: the one that reaches its SSH port, if any.
    @ivar control: the control port of a running tor, as a client endpoint string
        (C{tcp:127.0.0.1:9051}, C{unix:/run/tor/control}), or L{LAUNCH}.
    @ivar timeout: seconds one attempt may take (L{DEFAULT_ONION_TIMEOUT}).
    @ivar client_keys: the X25519 public keys (base32) of the clients allowed to find the
        service (C{ClientAuthV3}); empty: anyone who knows the address.
    @ivar retry_delay: seconds between two attempts.
    """

    tls_port: int
    ssh_port: int | None = None
    control: str = LAUNCH
    timeout: float = DEFAULT_ONION_TIMEOUT
    client_keys: tuple[str, ...] = ()
    retry_delay: float = ONION_RETRY_DELAY


def onion_key_path(data_dir: Path) -> Path:
    """
    The onion service's key in the relay's data directory.
    """
    return data_dir / TOR_DIR / ONION_KEY_FILE


def launched_tor_dir(data_dir: Path) -> Path:
    """
    The data directory of the tor the relay launches (kept: a restart bootstraps faster).
    """
    return data_dir / TOR_DIR / LAUNCHED_TOR_DIR
