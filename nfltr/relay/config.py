# -*- test-case-name: tests.relay.test_tap -*-
"""
The relay's settings and where it keeps its files.

A relay's data directory holds C{tls/} (its CA, certificate and share CA,
see L{nfltr.tls.ensure_relay_pki}), C{nfltr.sqlite3} (accounts and API
keys; none with a Redis directory, C{--directory}), C{ssh/} (the SSH host
keys, with C{--ssh}) and, while it runs, C{relay.json} (the addresses it
bound).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nfltr.link.memory import DEFAULT_LINK_MEMORY
from nfltr.ssh import SSHConfig
from nfltr.streams import AdmissionLimits
from nfltr.udp import DatagramLimits
from nfltr.wire.h2limits import DEFAULT_H2_LIMITS, H2Limits
from nfltr.wire.policy import Network

from .port_ranges import PortRanges

if TYPE_CHECKING:
    from nfltr.store import RedisAddress
    from nfltr.tor import OnionConfig

    from .cluster.config import ReplicaConfig

DEFAULT_TLS = "tcp:8443"
DEFAULT_ADMIN = "tcp:9090:interface=127.0.0.1"
DEFAULT_HTTP = "tcp:8080"
DEFAULT_REVOCATION_POLL = 2.0
# Seconds a stopping relay lets sessions in flight finish after its GOAWAY.
DEFAULT_DRAIN_TIMEOUT = 30.0
# Share URLs are https://NAME.SHARE_DOMAIN:PORT/; localhost needs no DNS.
DEFAULT_SHARE_DOMAIN = "localhost"
# Seconds a connection to the TLS port has to send its ClientHello (and,
# for the relay's own name, then its first bytes after the handshake).
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
DEFAULT_LEASE_TIME = 24 * 3600.0
DEFAULT_ADMISSION = AdmissionLimits()
# Connections each listener's kernel queue holds before the relay accepts
# them (nfltr.relay.backlog): Linux's default net.core.somaxconn since 5.4,
# above the default --per-source-connections (2000).
DEFAULT_BACKLOG = 4096
MAX_BACKLOG = 65535
#: Public ports one account may hold at once (--max-public-ports-per-account).
DEFAULT_PUBLIC_PORTS_PER_ACCOUNT = 4
#: Where public ports listen (--public-ports-interface): every IPv4 address.
DEFAULT_PUBLIC_PORTS_INTERFACE = "0.0.0.0"
DATABASE_NAME = "nfltr.sqlite3"
STATE_FILE_NAME = "relay.json"


def default_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """
    The relay's data directory when none is given:
    C{$XDG_DATA_HOME/nfltr/relay} if that variable is set and absolute, else
    C{~/.local/share/nfltr/relay}.
    """
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME", "")
    if not base or not os.path.isabs(base):
        home = env.get("HOME") or os.path.expanduser("~")
        base = os.path.join(home, ".local", "share")
    return Path(base) / "nfltr" / "relay"


def database_path(data_dir: str | os.PathLike[str]) -> Path:
    """
    The SQLite database of accounts and keys in C{data_dir}.
    """
    return Path(data_dir) / DATABASE_NAME


def state_file_path(data_dir: str | os.PathLike[str]) -> Path:
    """
    The C{relay.json} file in C{data_dir}.
    """
    return Path(data_dir) / STATE_FILE_NAME


@dataclass(frozen=True)
class ApiLimits:
    """
    The limits of the admin listener's API and dashboard
    (L{nfltr.relay.api}), each an option of C{nfltr relay}.

    @ivar failure_burst: failed authentications one source may make at
        once (C{--admin-failure-burst}) ...
    @ivar failure_interval: ... and then one every this many seconds
        (C{--admin-failure-interval}).
    @ivar sessions: dashboard sessions held at once, the oldest ended first
        (C{--dashboard-sessions}).
    @ivar streams: live-update streams open at once; more get 503
        (C{--dashboard-streams}).
    @ivar interval: seconds between live updates (C{--dashboard-interval}).
    """

    failure_burst: int = 10
    failure_interval: float = 6.0
    sessions: int = 256
    streams: int = 16
    interval: float = 1.0


#: The API's limits unless options say otherwise.
DEFAULT_API_LIMITS = ApiLimits()


@dataclass(frozen=True)
class RelayConfig:
    """
    What one relay process runs with.

    @ivar data_dir: the data directory (created 0700 on first start).
    @ivar tls: the endpoint string of the TLS listener; the relay adds TLS
        itself, so this is a plain stream endpoint (C{tcp:8443}).
    @ivar admin: the endpoint string of the admin HTTP listener.
    @ivar names: extra DNS names or IP addresses for the relay certificate.
    @ivar revocation_poll: seconds between two checks for revoked keys.
    @ivar drain_timeout: seconds a stopping relay lets sessions in flight
        finish after it sent GOAWAY on every link; those still open then
        are reset.
    @ivar share_domain: shares are reached on the TLS port as
        C{NAME.share_domain} (see L{nfltr.relay.tls_port}).
    @ivar handshake_timeout: seconds a connection to the TLS port has to
        send its whole ClientHello; for the relay's own names, as many again
        to finish the handshake and show its first bytes.
    @ivar lease_time: seconds a share name stays its account's after its
        agent left (L{nfltr.relay.leases}).
    @ivar public_port: the port share URLs name, when visitors reach the
        TLS port through another port (a port mapping, a load balancer);
        L{None}: the port the TLS listener bound.
    @ivar http: the endpoint string of the HTTP port, which redirects to
        HTTPS (L{nfltr.relay.redirect}); L{None}: none.
    @ivar admission: the per-source and handshake limits of each public
        port (the TLS port and the HTTP port), L{nfltr.streams}.
    @ivar max_agents: how many agents may be connected at once (L{None}:
        no limit).
    @ivar link_memory: bytes all links together may hold for their peers
        (session send queues, and what waits in full transports) before the
        links holding most are paused and take no new session
        (L{nfltr.link.memory}); L{None}: no limit.
    @ivar cert: the operator's certificate chain for the relay's names (and
        the inspect shares it covers), instead of the one the relay makes;
        read at start and on SIGHUP.
    @ivar key: its private key.
    @ivar inspect_rate: HTTP requests per second, and burst, each share may
        take through the relay's HTTP proxy (C{inspect}, plain HTTP);
        L{None}: no limit.
    @ivar h2_limits: the limits of HTTP/2 to visitors of inspect shares.
    @ivar ssh: the endpoint string of the SSH port (L{nfltr.ssh}); L{None}:
        none.
    @ivar ssh_config: its limits and options.
    @ivar backlog: the listen backlog of every listener whose endpoint
        string names none (L{nfltr.relay.backlog}).
    @ivar peer_drain_timeout: seconds a peer that sent GOAWAY may keep its
        sessions before the relay resets them and closes its link (L{None}:
        as long as the peer likes; L{nfltr.relay.link_handler.Relay}).
    @ivar ws_echo: a path on the relay's own name where a WebSocket echo
        answers, for the Autobahn TestSuite (L{None}: none, as in
        production).
    @ivar public_ports: the relay ports agents may publish their TCP shares
        on (L{nfltr.relay.public_ports}); none by default.
    @ivar public_ports_per_account: how many of them one account may hold.
    @ivar public_ports_interface: the address they listen on.
    @ivar udp_limits: the visitors' datagram sessions on each public UDP
        port (L{nfltr.relay.public_udp}).
    @ivar proxy_from: the networks of load balancers in front of the relay
        whose connections start with a PROXY protocol header naming the
        client (L{nfltr.relay.proxy_front}); none by default.
    @ivar directory: the Redis directory that holds accounts, API keys and
        SSH keys (C{--directory URL}, L{nfltr.store.RedisStore}); L{None}:
        SQLite in C{data_dir}.
    @ivar replica: how the relay runs as a replica of a cluster
        (C{--replica-listen}, L{nfltr.relay.cluster}); L{None}: a relay of
        its own.
    @ivar onion: its onion service (C{--onion}, L{nfltr.relay.onion}); L{None}: none.
    @ivar api: the limits of its API and dashboard.
    @ivar takeover: take the listening sockets of the relay running on the data
        directory (C{--takeover}, L{nfltr.relay.takeover}).
    """

    data_dir: Path
    tls: str = DEFAULT_TLS
    admin: str = DEFAULT_ADMIN
    names: tuple[str, ...] = field(default=())
    revocation_poll: float = DEFAULT_REVOCATION_POLL
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    share_domain: str = DEFAULT_SHARE_DOMAIN
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    lease_time: float = DEFAULT_LEASE_TIME
    public_port: int | None = None
    http: str | None = None
    admission: AdmissionLimits = DEFAULT_ADMISSION
    max_agents: int | None = None
    link_memory: int | None = DEFAULT_LINK_MEMORY
    cert: Path | None = None
    key: Path | None = None
    inspect_rate: tuple[float, int] | None = None
    h2_limits: H2Limits = DEFAULT_H2_LIMITS
    ws_echo: str | None = None
    ssh: str | None = None
    ssh_config: SSHConfig = field(default_factory=SSHConfig)
    backlog: int = DEFAULT_BACKLOG
    peer_drain_timeout: float | None = DEFAULT_DRAIN_TIMEOUT
    directory: RedisAddress | None = None
    replica: ReplicaConfig | None = None
    public_ports: PortRanges = field(default_factory=PortRanges)
    public_ports_per_account: int = DEFAULT_PUBLIC_PORTS_PER_ACCOUNT
    public_ports_interface: str = DEFAULT_PUBLIC_PORTS_INTERFACE
    udp_limits: DatagramLimits = field(default_factory=DatagramLimits)
    proxy_from: tuple[Network, ...] = ()
    onion: OnionConfig | None = None
    api: ApiLimits = DEFAULT_API_LIMITS
    takeover: bool = False
