# -*- test-case-name: tests.client.test_options -*-
"""
The options of C{nfltr tcp-connect AGENT PORT} (and C{twistd nfltr-agent
tcp-connect}; declared in L{nfltr.cli.agent_options}), checked in one
place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from nfltr.agent import (
    ConfigError,
    RelaySettings,
    parse_address,
    parse_bool,
    relay_settings,
    resume_timeout,
)
from nfltr.resume import DEFAULT_RESUME_TIMEOUT
from nfltr.tls import ClientTLS, InvalidFingerprint, client_creator, resuming_client
from nfltr.wire.messages import MessageError, check_name, parse_port

DEFAULT_LISTEN = "127.0.0.1:0"

@dataclass(frozen=True)
class ConnectOptions:
    """
    A checked C{tcp-connect} command line.

    @ivar agent_tls: the TLS client creator pinned to the agent's key, or
        L{None} without end-to-end TLS.
    """

    agent: str
    port: int
    listen_host: str
    listen_port: int
    relay: RelaySettings
    agent_tls: ClientTLS | None = field(repr=False, compare=False)
    #: Listen even when the check at start finds no agent (C{--wait}).
    wait: bool = False
    #: Seconds a session whose link was lost waits to be resumed (C{--resume-timeout}).
    resume_timeout: float = DEFAULT_RESUME_TIMEOUT

    @property
    def listen_address(self) -> str:
        """
        The listening address as a user writes it, with the port asked for.
        """
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        return f"{host}:{self.listen_port}"


def connect_options(
    agent: str, port: str | int, values: Mapping[str, str | None],
    environ: Mapping[str, str] = os.environ,
) -> ConnectOptions:
    """
    Check a C{tcp-connect} command line (options keyed by name: C{listen},
    C{pin}, C{e2ee}, C{resume}, C{wait} and the relay's; a missing or L{None} value
    takes its default).

    @raise ConfigError: what is wrong, for the user.
    """
    try:
        check_name(agent)
        text = str(port)
        checked = parse_port(text)
    except MessageError as e:
        raise ConfigError(str(e)) from None
    host, listen = parse_address(
        values.get("listen") or DEFAULT_LISTEN, "--listen", default_host="127.0.0.1",
        allow_zero=True,
    )
    e2ee = parse_bool(values.get("e2ee") or "true", "--e2ee")
    pin = values.get("pin")
    if e2ee and pin is None:
        raise ConfigError(
            "--pin is required for an end-to-end tunnel: the agent prints its fingerprint "
            "(sha256:...) at start, with the whole tcp-connect command"
        )
    if not e2ee and pin is not None:
        raise ConfigError("--pin has no use with --e2ee false")
    resume = parse_bool(values.get("resume") or "true", "--resume")
    try:
        tls = None
        if pin is not None:
            tls = (resuming_client(agent, pin) if resume
                   else client_creator(agent, pin=pin, role="agent"))
    except InvalidFingerprint as e:
        raise ConfigError(str(e)) from None
    return ConnectOptions(
        agent, checked, host, listen, relay_settings(values, environ), tls,
        wait=bool(values.get("wait")), resume_timeout=resume_timeout(values.get("resume-timeout")),
    )
