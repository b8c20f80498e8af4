# -*- test-case-name: tests.tor -*-
"""
Tor for nfltr: the relay's onion service (a key nfltr keeps, so the address is
known before tor is up and survives restarts; published through a running
tor's control port or a tor nfltr launches), and connections through Tor for
agents and connectors (C{--tor}).  txtorcon is imported only when one of them
is used.  Operator documentation: docs/tor.md.
"""

from nfltr.tor._client import TorEndpoint, TorLauncher, TorOptionError, socks_endpoint_text
from nfltr.tor._config import (
    DEFAULT_ONION_TIMEOUT,
    LAUNCH,
    ONION_SHARE_DOMAIN,
    OnionConfig,
    launched_tor_dir,
    onion_key_path,
)
from nfltr.tor._control import TorUnavailable, open_tor
from nfltr.tor._keys import (
    ClientAuthKeys,
    OnionKey,
    OnionKeyError,
    is_onion_host,
    load_or_create_key,
    new_client_keys,
    onion_address,
    parse_client_key,
    read_client_keys,
)
from nfltr.tor._publish import (
    PublishError,
    UploadRound,
    add_onion_command,
    publish,
    remove_command,
)

__all__ = [
    "DEFAULT_ONION_TIMEOUT",
    "LAUNCH",
    "ONION_SHARE_DOMAIN",
    "ClientAuthKeys",
    "OnionConfig",
    "OnionKey",
    "OnionKeyError",
    "PublishError",
    "TorEndpoint",
    "TorLauncher",
    "TorOptionError",
    "TorUnavailable",
    "UploadRound",
    "add_onion_command",
    "is_onion_host",
    "launched_tor_dir",
    "load_or_create_key",
    "new_client_keys",
    "onion_address",
    "onion_key_path",
    "open_tor",
    "parse_client_key",
    "publish",
    "read_client_keys",
    "remove_command",
    "socks_endpoint_text",
]
