# -*- test-case-name: tests.agent -*-
"""
The agent: dials the relay, declares its shares, and serves the sessions the
relay opens from local services (C{nfltr tcp PORT}).  The dialler and the
relay settings serve C{nfltr tcp-connect} too.
"""

from ._dialler import NON_HEALING, WELCOME_TIMEOUT, DiallerObserver, RelayDialler
from ._health import HealthCheck, HealthChecker, parse_health_check
from ._local import ServiceConnector, TcpEnd, free_local_ports, splice_local
from ._log_limit import Quiet
from ._names import agent_name, claim_name, default_state_dir, random_name
from ._options import (
    AgentOptions,
    agent_options,
    http_agent_options,
    http_option,
    resume_timeout,
)
from ._relays import IRelayChoice, RelayAddresses, ShuffledNames
from ._secrets import read_secret_file
from ._service import AgentService, AgentSetup, prepare_agent
from ._sessions import AgentSessions
from ._settings import (
    DEFAULT_RELAY,
    KEY_ENV,
    MAX_RELAYS,
    ConfigError,
    RelaySettings,
    parse_address,
    parse_bool,
    parse_relays,
    relay_settings,
)
from ._shares import HttpOption
from ._update import EntryUpdater

__all__ = [
    "claim_name",
    "DEFAULT_RELAY", "KEY_ENV", "NON_HEALING", "WELCOME_TIMEOUT",
    "AgentOptions", "AgentService", "AgentSessions", "AgentSetup", "ConfigError",
    "DiallerObserver", "EntryUpdater", "HealthCheck", "HealthChecker", "HttpOption", "Quiet",
    "RelayDialler", "RelaySettings",
    "ServiceConnector",
    "TcpEnd", "agent_name", "agent_options", "default_state_dir", "free_local_ports",
    "http_agent_options",
    "http_option", "parse_address", "parse_health_check",
    "parse_bool", "prepare_agent", "random_name", "read_secret_file", "relay_settings",
    "resume_timeout",
    "splice_local", "IRelayChoice", "MAX_RELAYS", "RelayAddresses", "ShuffledNames",
    "parse_relays",
]
