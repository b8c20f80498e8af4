# -*- test-case-name: tests.relay.ssh.test_server -*-
"""
L{ssh_factory}: the SSH port's factory for a relay, from its shared state,
its store and the directory of its host keys.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from nfltr.ssh import SSHConfig
from nfltr.ssh.hostkeys import load_or_create_host_keys
from nfltr.store import IStore
from nfltr.streams import Admission

from ._server import SSHRelayFactory
from ._user import SSHHub


def ssh_factory(
    relay: Any, config: SSHConfig, store: IStore, keyDir: Path, clock: Any,
    address: Callable[[], tuple[str, int]], admission: Admission | None = None,
) -> SSHRelayFactory:
    """
    The factory of the relay's SSH port.

    @param relay: the relay's L{nfltr.relay.link_handler.Relay}.
    @param store: checks API keys, with password logins (SSH keys: the
        relay's L{nfltr.relay.agents.Relay.sshKeyAccount}).
    @param keyDir: where the host keys are (made on first start, 0600).
    @param address: the relay's host name and SSH port, for the help text.
    """
    hub = SSHHub(relay, config, clock, address)
    return SSHRelayFactory(hub, load_or_create_host_keys(keyDir), store, admission)
