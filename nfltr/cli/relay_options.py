# -*- test-case-name: tests.relay.test_tap,tests.cli.test_relay -*-
"""
The relay's options, declared once (L{RELAY_OPTIONS}): twistd's
C{nfltr-relay} plugin (L{nfltr.relay_tap}) and C{nfltr relay}
(L{nfltr.cli.relay}) both parse them with L{RelayOptions}, which checks each
value with its option's parser and builds the L{RelayConfig} to run
(L{relay_config}).

To add an option: a row in L{RELAY_OPTIONS} (its parser checks the value and
names the option in its error), and the field it fills in L{relay_config}.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from twisted.python import usage

from nfltr.cli.api_options import API_RELAY_OPTIONS, api_limits
from nfltr.cli.logs import parse_level
from nfltr.cli.options import FLAG, REPEAT, Option, option_values, parse_values
from nfltr.cli.presence_options import PRESENCE_RELAY_OPTIONS, presence_settings
from nfltr.cli.replica_options import handover_options
from nfltr.cli.tor_options import ONION_ENDPOINT_HINT, TOR_RELAY_OPTIONS, onion_config
from nfltr.cli.twistd import TableOptions
from nfltr.link.memory import DEFAULT_LINK_MEMORY, MIN_LINK_MEMORY
from nfltr.relay.certs import RelayCertificate
from nfltr.relay.cluster.config import (
    DEFAULT_REPLICA_LINKS,
    ReplicaConfig,
    check_links,
    parse_address,
)
from nfltr.relay.config import (
    DEFAULT_ADMIN,
    DEFAULT_BACKLOG,
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_HTTP,
    DEFAULT_LEASE_TIME,
    DEFAULT_PUBLIC_PORTS_INTERFACE,
    DEFAULT_PUBLIC_PORTS_PER_ACCOUNT,
    DEFAULT_REVOCATION_POLL,
    DEFAULT_SHARE_DOMAIN,
    DEFAULT_TLS,
    MAX_BACKLOG,
    RelayConfig,
    default_data_dir,
)
from nfltr.relay.port_ranges import PortRangeError, parse_port_ranges
from nfltr.relay.reuseport import server_endpoint
from nfltr.relay.tls_port import check_share_domain
from nfltr.ssh import SSHConfig, SSHConfigError
from nfltr.store import InvalidRedisURL, RedisAddress, parse_redis_url
from nfltr.streams import AdmissionLimits
from nfltr.tls import PKIError, subject_alt_names
from nfltr.udp import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, DatagramLimits
from nfltr.wire.h2limits import H2Limits, parse_h2_limits
from nfltr.wire.messages import is_port_text
from nfltr.wire.policy import Network

MAX_REVOCATION_POLL = 3600.0
MAX_DRAIN_TIMEOUT = 3600.0
MAX_HANDSHAKE_TIMEOUT = 300.0
MAX_LEASE_TIME = 365 * 24 * 3600.0
_MAX_PORT = 65535
#: The largest --link-memory: beyond it the limit would never be reached.
MAX_LINK_MEMORY = 1 << 40
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
# Endpoint types that would add a TLS layer of their own under the relay's.
_TLS_ENDPOINT_TYPES = ("ssl", "tls", "le", "lets")


def seconds(
    value: object, option: str, limit: float = MAX_REVOCATION_POLL, zero: bool = False
) -> float:
    """
    A duration in seconds, more than 0 (or 0 too, with C{zero}) and at most
    C{limit}.

    @raise usage.UsageError: naming C{option}.
    """
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = float("nan")
    above = number >= 0 if zero else number > 0
    if not (above and number <= limit):  # NaN fails both
        least = "0 or more" if zero else "more than 0"
        raise usage.UsageError(f"{option} {value}: give seconds, {least} and at most {limit:g}")
    return number


def limit(value: object, option: str, kind: type = int, none: bool = True) -> Any:
    """
    A positive limit, or L{None} for C{none} where allowed.

    @raise usage.UsageError: naming C{option}.
    """
    text = str(value).strip().lower()
    if none and text == "none":
        return None
    try:
        number = kind(text)
    except ValueError:
        number = 0
    if not number > 0:
        also = " or none" if none else ""
        raise usage.UsageError(f"{option} {value}: give a number more than 0{also}")
    return number


def _h2Limits(value: object, option: str) -> H2Limits:
    try:
        return parse_h2_limits(str(value or ""))
    except ValueError as e:
        raise usage.UsageError(f"{option}: {e}") from None


def check_endpoint(spec: str, option: str) -> str:
    """
    Check that C{spec} is a server endpoint string Twisted can build, without
    listening (building an endpoint does not use the reactor).

    @raise usage.UsageError: naming C{option}.
    """
    if not spec or not spec.strip():
        raise usage.UsageError(f"{option}: an endpoint string is required, e.g. tcp:8443")
    if spec.split(":", 1)[0].strip().lower() == "onion":
        raise usage.UsageError(f"{option} {spec!r}: {ONION_ENDPOINT_HINT}")
    try:
        server_endpoint(None, spec, DEFAULT_BACKLOG)
    except (ValueError, TypeError, KeyError, IndexError, OSError) as e:
        raise usage.UsageError(f"{option} {spec!r}: not a usable endpoint: {e}") from None
    return spec


def _endpointOrNone(spec: str, option: str) -> str | None:
    return None if spec.strip().lower() == "none" else check_endpoint(spec, option)


def _tlsEndpoint(spec: str, option: str) -> str:
    if spec.split(":", 1)[0].strip().lower() in _TLS_ENDPOINT_TYPES:
        raise usage.UsageError(
            f"{option} {spec!r}: the relay adds TLS itself; give a plain endpoint such as tcp:8443"
        )
    return check_endpoint(spec, option)


def _names(names: list[str], option: str) -> tuple[str, ...]:
    try:
        subject_alt_names(tuple(names))
    except PKIError as e:
        raise usage.UsageError(f"{option}: {e}") from None
    return tuple(names)


def _shareDomain(value: str, option: str) -> str:
    try:
        return check_share_domain(value)
    except ValueError as e:
        raise usage.UsageError(f"{option} {e}") from None


def _publicPort(value: object, option: str) -> int | None:
    if value is None:
        return None
    if not is_port_text(str(value)) or not 1 <= int(str(value)) <= _MAX_PORT:
        raise usage.UsageError(f"{option} {value}: give a port, 1..{_MAX_PORT}")
    return int(str(value))


def _interface(value: str, option: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise usage.UsageError(f"{option} {value}: give an IP address, e.g. 0.0.0.0 or ::") \
            from None
    return value


def _echoPath(path: str | None, option: str) -> str | None:
    if path is not None and (not path.startswith("/") or path == "/link"):
        raise usage.UsageError(f"{option}: give a path such as /echo (not /link)")
    return path


def _backlog(value: object, option: str) -> int:
    backlog = limit(value, option, none=False)
    if backlog > MAX_BACKLOG:
        raise usage.UsageError(f"{option} {value}: at most {MAX_BACKLOG}")
    return int(backlog)


def _dataDir(value: str | None, option: str) -> Path:
    path = Path(os.path.expanduser(value)) if value else default_data_dir()
    return path.absolute()


def _directory(value: str | None, option: str) -> RedisAddress | None:
    """
    A Redis URL (L{parse_redis_url}), or L{None} when not given (SQLite in
    the data directory).

    @raise usage.UsageError: naming C{option}, never the password.
    """
    if value is None:
        return None
    try:
        return parse_redis_url(value)
    except InvalidRedisURL as e:
        raise usage.UsageError(f"{option}: {e}") from None


def _reading(parse: Callable[[str], Any], errors: type[Exception]) -> Callable[[str, str], Any]:
    """
    An option's parser from C{parse}, its C{errors} usage errors that name
    the option and the value.
    """

    def read(value: str, option: str) -> Any:
        try:
            return parse(value)
        except errors as e:
            raise usage.UsageError(f"{option} {value}: {e}") from None

    return read


def _networkList(value: str) -> tuple[Network, ...]:
    text = value.strip()
    if text.lower() in ("", "none"):
        return ()
    networks = []
    for part in text.split(","):
        try:
            networks.append(ipaddress.ip_network(part.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{part.strip()!r} is not an address or a CIDR network") from None
    return tuple(networks)


_logLevel = _reading(parse_level, ValueError)
_networks = _reading(_networkList, ValueError)
_portRanges = _reading(parse_port_ranges, PortRangeError)


_count = partial(limit, none=False)


def _size(value: object, option: str) -> int | None:
    """
    A byte count (C{256M}, C{1G}, C{1048576}) of at least L{MIN_LINK_MEMORY},
    or L{None} for C{none}.

    @raise usage.UsageError: naming C{option}.
    """
    text = str(value).strip().lower()
    if text == "none":
        return None
    unit = text[-1:] if text[-1:] in _SIZE_UNITS else ""
    digits = text[: len(text) - len(unit)]
    number = int(digits) * _SIZE_UNITS[unit] if digits.isascii() and digits.isdigit() else 0
    if not MIN_LINK_MEMORY <= number <= MAX_LINK_MEMORY:
        raise usage.UsageError(
            f"{option} {value}: give bytes (K, M or G allowed) from {MIN_LINK_MEMORY} to "
            f"{MAX_LINK_MEMORY}, or none"
        )
    return number


def _secondsOrNone(value: object, option: str) -> float | None:
    """
    Seconds, 0 to L{MAX_DRAIN_TIMEOUT}, or L{None} for C{none}.
    """
    if str(value).strip().lower() == "none":
        return None
    return seconds(value, option, limit=MAX_DRAIN_TIMEOUT, zero=True)
def _replicaAddress(value: str | None, option: str) -> str | None:
    if value is None:
        return None
    try:
        parse_address(value)
    except ValueError as e:
        raise usage.UsageError(f"{option} {e}") from None
    return value


def _replicaLinks(value: object, option: str) -> int:
    try:
        return check_links(value)
    except ValueError as e:
        raise usage.UsageError(f"{option} {e}") from None


def _absolute(value: str | None, option: str) -> Path | None:
    return None if value is None else Path(os.path.expanduser(value)).absolute()



RELAY_OPTIONS: tuple[Option, ...] = (
    Option("name", None,
           "Another DNS name or IP address for the relay certificate (repeatable).",
           kind=REPEAT, parse=_names),
    Option("tls", None,
           "Endpoint of the TLS port (links, and share URLs by server name); the relay adds TLS "
           "itself, so give a plain stream endpoint (tcp:PORT[:interface=ADDR], unix:PATH); for "
           "an onion service add --onion.", DEFAULT_TLS, parse=_tlsEndpoint),
    Option("revocation-poll", None, "Seconds between checks for revoked API keys.",
           DEFAULT_REVOCATION_POLL, parse=seconds),
    Option("takeover", None,
           "Replace the relay running on this --data-dir without refusing a connection: take "
           "its listening sockets (TLS, HTTP, SSH ports; the listener options then name the "
           "sockets it had), and it drains and stops.", kind=FLAG),
    Option("drain-timeout", None,
           "On SIGTERM or SIGINT: seconds sessions in flight may take to finish after every "
           "link got a GOAWAY; those still open then are reset (0: reset them at once).",
           DEFAULT_DRAIN_TIMEOUT, parse=partial(seconds, limit=MAX_DRAIN_TIMEOUT, zero=True)),
    Option("peer-drain-timeout", None,
           "Seconds an agent or client that announced it is going away (GOAWAY) may keep its "
           "sessions; those still open then are reset and its link closed (none: no limit).",
           str(DEFAULT_DRAIN_TIMEOUT), parse=_secondsOrNone),
    Option("handshake-timeout", None,
           "Seconds a connection to the TLS port has to send its TLS ClientHello (and, for the "
           "relay's own names, then to finish the handshake and send its first bytes).",
           DEFAULT_HANDSHAKE_TIMEOUT, parse=partial(seconds, limit=MAX_HANDSHAKE_TIMEOUT)),
    Option("share-domain", None,
           "Shares are reached on the TLS port as NAME.DOMAIN; other names than the relay's "
           "own (--name, localhost) get a TLS unrecognized_name alert.",
           DEFAULT_SHARE_DOMAIN, parse=_shareDomain),
    Option("lease-time", None,
           "Seconds an agent or share name stays its account's after its last holder left: "
           "meanwhile no other account can take it (0: released at once).",
           DEFAULT_LEASE_TIME, parse=partial(seconds, limit=MAX_LEASE_TIME, zero=True)),
    Option("public-port", None,
           "The port share URLs name, when visitors reach the TLS port through another port "
           "(a port mapping, a load balancer) [default: the TLS port's].", parse=_publicPort),
    Option("public-ports", None,
           "Relay ports agents may publish a TCP share on (nfltr tcp PORT --public-port N, or "
           "ssh -R N:localhost:PORT), which visitors reach straight: ranges and ports, e.g. "
           "20000-20999,21000 (none: no public ports).", "none", parse=_portRanges),
    Option("max-public-ports-per-account", None,
           "Public ports one account may hold at once.", str(DEFAULT_PUBLIC_PORTS_PER_ACCOUNT),
           parse=_count),
    Option("udp-idle-timeout", None,
           "Seconds a visitor's datagram session on a public UDP port lives without a "
           "datagram either way.", str(DEFAULT_IDLE_TIMEOUT),
           parse=partial(seconds, limit=MAX_LEASE_TIME)),
    Option("udp-max-sessions", None,
           "Visitors' datagram sessions each public UDP port holds at once; a new visitor's "
           "datagrams beyond them are dropped.", str(DEFAULT_MAX_SESSIONS), parse=_count),
    Option("public-ports-interface", None,
           "The address public ports listen on (:: for IPv6 too).",
           DEFAULT_PUBLIC_PORTS_INTERFACE, parse=_interface),
    Option("proxy-protocol-from", None,
           "Networks of load balancers in front of the relay (CIDR or addresses, "
           "comma-separated): their connections to the TLS, HTTP, SSH and public ports must "
           "start with a PROXY protocol header (v1 or v2), and the client it names is the one "
           "per-source limits, allow lists and X-Forwarded-For see; a header from elsewhere is "
           "refused (none: no PROXY protocol).", "none", parse=_networks),
    Option("per-source-connections", None,
           "Connections one source address may have open at once on each public port "
           "(none: no limit).", "2000", parse=limit),
    Option("per-source-rate", None,
           "New connections per second one source address may open on each public port, on "
           "average (none: no limit).", "200", parse=partial(limit, kind=float)),
    Option("per-source-burst", None,
           "New connections one source address may open at once after a quiet spell.", "2000",
           parse=_count),
    Option("max-handshakes", None,
           "Connections over all sources that may be in their handshake at once on each "
           "public port (none: no limit).", "10000", parse=limit),
    Option("ws-echo", None,
           "Serve a WebSocket echo on this path of the relay's own name, on the same stack as "
           "WebSocket links: for the Autobahn TestSuite only, never in production.",
           parse=_echoPath),
    Option("inspect-rate", None,
           "HTTP requests per second each inspect (or plain-HTTP) share may take through the "
           "relay; more get 429 (none: no limit).", "none", parse=partial(limit, kind=float)),
    Option("inspect-burst", None,
           "How many requests such a share may send at once after a quiet spell.", "100",
           parse=_count),
    Option("h2-limits", None,
           "HTTP/2 limits of inspect shares (the relay ends TLS): NAME=VALUE,... (see "
           "docs/shares.md); unnamed ones keep their defaults.", "", parse=_h2Limits),
    Option("cert", None,
           "A certificate chain (PEM) to serve for the relay's names instead of the one it "
           "makes, e.g. a wildcard for a real domain; it also serves the inspect shares it "
           "covers. Read at start and again on SIGHUP."),
    Option("key", None, "The private key (PEM) of --cert."),
    Option("admin", None, "Endpoint of the admin HTTP listener (/healthz).", DEFAULT_ADMIN,
           parse=check_endpoint),
    *API_RELAY_OPTIONS,
    Option("http", None,
           "Endpoint of the HTTP port, which redirects every request to HTTPS (none: no HTTP "
           "port).", DEFAULT_HTTP, parse=_endpointOrNone),
    Option("ssh", None,
           "Endpoint of the SSH port, where OpenSSH clients publish services (ssh -R) and reach "
           "agents (ssh -L, -W) with keys registered by `nfltr keys add-ssh` (none: no SSH "
           "port); e.g. tcp:2222.", "none", parse=_endpointOrNone),
    Option("ssh-window", None,
           "Bytes an SSH client may send on one forwarded channel before the relay wrote them "
           "onward (also what one stuck channel can hold).", str(SSHConfig.window),
           parse=_count),
    Option("ssh-max-channels", None, "Channels one SSH connection may have open at once.",
           str(SSHConfig.max_channels), parse=_count),
    Option("ssh-max-forwards", None, "Remote forwards (ssh -R) one SSH connection may hold.",
           str(SSHConfig.max_forwards), parse=_count),
    Option("ssh-login-grace", None, "Seconds an SSH client has from connecting to logging in.",
           str(SSHConfig.login_grace), parse=seconds),
    Option("ssh-open-timeout", None, "Seconds an agent has to accept (reach its service for) "
           "an ssh -L/-W channel before the relay refuses the channel.",
           str(SSHConfig.open_timeout), parse=seconds),
    Option("ssh-max-auth-tries", None,
           "Failed SSH authentication attempts before the relay hangs up.",
           str(SSHConfig.max_auth_tries), parse=_count),
    Option("ssh-max-refusals", None,
           "Refused forward requests (ssh -R, and cancelling one) on one SSH connection before "
           "the relay hangs up (none: no limit).", str(SSHConfig.max_refusals), parse=limit),
    Option("ssh-max-status-lines", None,
           "Lines (what each ssh -R published or why it was refused) one SSH connection's "
           "status display keeps; older ones are dropped.", str(SSHConfig.max_status_lines),
           parse=_count),
    Option("ssh-pq-only", None,
           "Offer only the post-quantum SSH key exchange (mlkem768x25519-sha256, OpenSSH 9.9 "
           "and later), dropping curve25519-sha256 for older clients.", kind=FLAG),
    Option("ssh-password-auth", None,
           "Also accept an account's API key as the SSH password (public keys only otherwise).",
           kind=FLAG),
    Option("data-dir", None,
           "Where the relay keeps its certificates, database and relay.json "
           "[default: $XDG_DATA_HOME/nfltr/relay or ~/.local/share/nfltr/relay].",
           short="d", parse=_dataDir),
    Option("directory", None,
           "Keep accounts, API keys and SSH keys in this Redis directory, shared with other "
           "relays and `nfltr keys --directory`: redis://HOST:PORT/DB, "
           "rediss://HOST:PORT/DB?ca=FILE or redis+unix:///PATH?db=N (password in "
           "NFLTR_REDIS_PASSWORD, or in the URL) [default: SQLite in the data directory].",
           parse=_directory),
    Option("link-memory", None,
           "Bytes all links together may hold for their peers (what waits in session send "
           "queues and in full transports) before the links holding most have their sessions "
           "paused and take no new session; a number of bytes with an optional K, M or G "
           "(none: no limit).", f"{DEFAULT_LINK_MEMORY >> 20}M", parse=_size),
    Option("max-agents", None,
           "Agents that may be connected at once; one more is refused (and exits) with a "
           "message naming this option (none: no limit).", "none", parse=limit),
    Option("listen-backlog", None,
           "Connections each listener (TLS, HTTP, SSH, admin) lets the kernel queue before the "
           "relay accepts them, unless its endpoint string says backlog=; the kernel caps it at "
           "net.core.somaxconn.", str(DEFAULT_BACKLOG), parse=_backlog),
    Option("log-level", None, "What to log: debug, info, warn, error or critical.", "info",
           parse=_logLevel),
    Option("replica-listen", None,
           "Run as a replica of a cluster: endpoint of the replica link, where the other "
           "replicas on the same --directory forward visitors of the agents held here (mutual "
           "TLS with the cluster CA, added by the relay); none: a relay of its own.", "none",
           parse=_endpointOrNone),
    Option("replica-address", None,
           "HOST:PORT the other replicas dial this one's replica link at, registered in the "
           "directory [default: the address --replica-listen bound, which must name an "
           "interface].", parse=_replicaAddress),
    Option("cluster-ca", None,
           "Directory of the cluster CA (made by `nfltr cluster-ca init DIR`), the same on "
           "every replica: it signs each replica's certificate for the replica link.",
           parse=_absolute),
    Option("replica-links", None,
           "Link connections this replica keeps to each replica it forwards to.",
           str(DEFAULT_REPLICA_LINKS), parse=_replicaLinks),
    *PRESENCE_RELAY_OPTIONS,
    *handover_options(seconds),
    *TOR_RELAY_OPTIONS,
)


def _replicaConfig(values: Mapping[str, Any]) -> ReplicaConfig | None:
    """
    The replica's settings, if C{--replica-listen} asks for one.

    @raise usage.UsageError: naming the option that is missing.
    """
    listen = values["replica-listen"]
    if listen is None:
        return None
    if values["directory"] is None:
        raise usage.UsageError("--replica-listen needs --directory: replicas share a Redis "
                               "directory")
    if values["cluster-ca"] is None:
        raise usage.UsageError("--replica-listen needs --cluster-ca DIR (make one with "
                               "`nfltr cluster-ca init DIR`)")
    return ReplicaConfig(listen, values["cluster-ca"], values["replica-address"],
                         values["replica-links"], handover_wait=values["handover-wait"],
                         **presence_settings(values))


def relay_config(values: Mapping[str, Any]) -> RelayConfig:
    """
    The relay's configuration from the parsed values of L{RELAY_OPTIONS}
    (keyed by option name), with the checks that span options.

    @raise usage.UsageError: naming the bad option.
    """
    cert, key = values["cert"], values["key"]
    if (cert is None) != (key is None):
        raise usage.UsageError("--cert and --key go together")
    if cert is not None:
        try:
            RelayCertificate(cert, key)
        except PKIError as e:
            raise usage.UsageError(f"--cert/--key: {e}") from None
        cert, key = Path(cert).absolute(), Path(key).absolute()
    rate = values["inspect-rate"]
    return RelayConfig(
        data_dir=values["data-dir"], tls=values["tls"], admin=values["admin"],
        names=values["name"], revocation_poll=values["revocation-poll"],
        drain_timeout=values["drain-timeout"], share_domain=values["share-domain"],
        handshake_timeout=values["handshake-timeout"], lease_time=values["lease-time"],
        public_port=values["public-port"], http=values["http"],
        admission=AdmissionLimits(
            per_source_open=values["per-source-connections"],
            per_source_rate=values["per-source-rate"],
            per_source_burst=values["per-source-burst"],
            handshakes=values["max-handshakes"],
        ),
        max_agents=values["max-agents"], link_memory=values["link-memory"], cert=cert, key=key,
        inspect_rate=None if rate is None else (rate, values["inspect-burst"]),
        h2_limits=values["h2-limits"],
        ws_echo=values["ws-echo"], ssh=values["ssh"], ssh_config=_sshConfig(values),
        backlog=values["listen-backlog"], peer_drain_timeout=values["peer-drain-timeout"],
        directory=values["directory"], replica=_replicaConfig(values),
        public_ports=values["public-ports"],
        public_ports_per_account=values["max-public-ports-per-account"],
        public_ports_interface=values["public-ports-interface"],
        udp_limits=DatagramLimits(values["udp-idle-timeout"], values["udp-max-sessions"]),
        proxy_from=values["proxy-protocol-from"],
        onion=onion_config(values),
        takeover=bool(values["takeover"]),
        api=api_limits(values),
    )


def _sshConfig(values: Mapping[str, Any]) -> SSHConfig:
    """
    The SSH port's limits and options.

    @raise usage.UsageError: naming the bad option.
    """
    try:
        return SSHConfig(
            window=values["ssh-window"], max_channels=values["ssh-max-channels"],
            max_forwards=values["ssh-max-forwards"], login_grace=values["ssh-login-grace"],
            max_auth_tries=values["ssh-max-auth-tries"], open_timeout=values["ssh-open-timeout"],
            max_refusals=values["ssh-max-refusals"],
            max_status_lines=values["ssh-max-status-lines"],
            pq_only=bool(values["ssh-pq-only"]),
            password_auth=bool(values["ssh-password-auth"]),
        )
    except SSHConfigError as e:
        raise usage.UsageError(f"--ssh-...: {e}") from None


class RelayOptions(TableOptions):
    """
    The relay's options.  After parsing, each holds its checked value (a
    L{LogLevel} for C{log-level}, say) and C{self.config} is the
    L{RelayConfig} to run.
    """

    longdesc = (
        "Run an nfltr relay. On its first start it creates its data directory, a CA and "
        "certificate, and an empty database of accounts and API keys (manage them with "
        "`nfltr accounts` and `nfltr keys`). Listeners are Twisted endpoint strings."
    )
    table = RELAY_OPTIONS

    def __init__(self) -> None:
        super().__init__()
        self.config: RelayConfig | None = None

    def postOptions(self) -> None:
        """
        Check the options and build C{self.config}.

        @raise usage.UsageError: naming the bad option.
        """
        values = parse_values(option_values(self, RELAY_OPTIONS), RELAY_OPTIONS)
        self.update(values)
        self.config = relay_config(values)
