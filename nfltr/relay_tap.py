# -*- test-case-name: tests.relay.test_tap -*-
"""
C{twistd nfltr-relay}: the relay's options and service.

L{Options} is shared with C{nfltr relay} (L{nfltr.cli_relay}), which runs
the same service without twistd.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from twisted.application.service import MultiService
from twisted.internet.endpoints import serverFromString
from twisted.python import usage
from twisted.python.failure import Failure

from nfltr.messages import is_port_text
from nfltr.relay.certs import RelayCertificate
from nfltr.relay.config import (
    DEFAULT_ADMIN,
    DEFAULT_BACKLOG,
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_HTTP,
    DEFAULT_LEASE_TIME,
    DEFAULT_REVOCATION_POLL,
    DEFAULT_SHARE_DOMAIN,
    DEFAULT_TLS,
    MAX_BACKLOG,
    RelayConfig,
    default_data_dir,
)
from nfltr.relay.router import check_share_domain
from nfltr.relay.service import RelayService
from nfltr.ssh import SSHConfig, SSHConfigError
from nfltr.streams import AdmissionLimits
from nfltr.tls import PKIError, subject_alt_names

MAX_REVOCATION_POLL = 3600.0
MAX_DRAIN_TIMEOUT = 3600.0
MAX_HANDSHAKE_TIMEOUT = 300.0
MAX_LEASE_TIME = 365 * 24 * 3600.0
_MAX_PORT = 65535
# Endpoint types that would add a TLS layer of their own under the relay's.
_TLS_ENDPOINT_TYPES = ("ssl", "tls", "le", "lets")


def _seconds(
    value: object, option: str, limit: float = MAX_REVOCATION_POLL, zero: bool = False
) -> float:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = float("nan")
    above = seconds >= 0 if zero else seconds > 0
    if not (above and seconds <= limit):  # NaN fails both
        least = "0 or more" if zero else "more than 0"
        raise usage.UsageError(f"{option} {value}: give seconds, {least} and at most {limit:g}")
    return seconds


class Options(usage.Options):
    """
    The relay's options.  After parsing, C{self.config} is the
    L{RelayConfig} to run.
    """

    longdesc = (
        "Run an nfltr relay. On its first start it creates its data directory, a CA and "
        "certificate, and an empty database of accounts and API keys (manage them with "
        "`nfltr accounts` and `nfltr keys`). Listeners are Twisted endpoint strings."
    )
    optParameters = [
        ["data-dir", "d", None,
         "Where the relay keeps its certificates, database and relay.json "
         "[default: $XDG_DATA_HOME/nfltr/relay or ~/.local/share/nfltr/relay]."],
        ["tls", None, DEFAULT_TLS,
         "Endpoint of the TLS port (links, and share URLs by server name); the relay adds TLS "
         "itself, so give a plain stream endpoint (tcp:PORT[:interface=ADDR], unix:PATH, "
         "onion:...)."],
        ["admin", None, DEFAULT_ADMIN, "Endpoint of the admin HTTP listener (/healthz)."],
        ["http", None, DEFAULT_HTTP,
         "Endpoint of the HTTP port, which redirects every request to HTTPS (none: no HTTP "
         "port)."],
        ["revocation-poll", None, DEFAULT_REVOCATION_POLL,
         "Seconds between checks for revoked API keys."],
        ["drain-timeout", None, DEFAULT_DRAIN_TIMEOUT,
         "On SIGTERM or SIGINT: seconds sessions in flight may take to finish after every "
         "link got a GOAWAY; those still open then are reset (0: reset them at once)."],
        ["share-domain", None, DEFAULT_SHARE_DOMAIN,
         "Shares are reached on the TLS port as NAME.DOMAIN; other names than the relay's "
         "own (--name, localhost) get a TLS unrecognized_name alert."],
        ["handshake-timeout", None, DEFAULT_HANDSHAKE_TIMEOUT,
         "Seconds a connection to the TLS port has to send its TLS ClientHello (and, for the "
         "relay's own names, then to finish the handshake and send its first bytes)."],
        ["lease-time", None, DEFAULT_LEASE_TIME,
         "Seconds a share name stays its account's after its agent left: meanwhile no other "
         "account can publish it (0: released at once)."],
        ["per-source-connections", None, "2000",
         "Connections one source address may have open at once on each public port "
         "(none: no limit)."],
        ["per-source-rate", None, "200",
         "New connections per second one source address may open on each public port, on "
         "average (none: no limit)."],
        ["per-source-burst", None, "2000",
         "New connections one source address may open at once after a quiet spell."],
        ["max-handshakes", None, "10000",
         "Connections over all sources that may be in their handshake at once on each "
         "public port (none: no limit)."],
        ["max-agents", None, "none",
         "Agents that may be connected at once; one more is refused (and exits) with a "
         "message naming this option (none: no limit)."],
        ["cert", None, None,
         "A certificate chain (PEM) to serve for the relay's names instead of the one it "
         "makes, e.g. a wildcard for a real domain; it also serves the inspect shares it "
         "covers. Read at start and again on SIGHUP."],
        ["key", None, None, "The private key (PEM) of --cert."],
        ["inspect-rate", None, "none",
         "HTTP requests per second each inspect (or plain-HTTP) share may take through the "
         "relay; more get 429 (none: no limit)."],
        ["inspect-burst", None, "100",
         "How many requests such a share may send at once after a quiet spell."],
        ["ws-echo", None, None,
         "Serve a WebSocket echo on this path of the relay's own name, on the same stack as "
         "WebSocket links: for the Autobahn TestSuite only, never in production."],
        ["ssh", None, "none",
         "Endpoint of the SSH port, where OpenSSH clients publish services (ssh -R) and reach "
         "agents (ssh -L, -W) with keys registered by `nfltr keys add-ssh` (none: no SSH "
         "port); e.g. tcp:2222."],
        ["ssh-window", None, str(SSHConfig.window),
         "Bytes an SSH client may send on one forwarded channel before the relay wrote them "
         "onward (also what one stuck channel can hold)."],
        ["ssh-max-channels", None, str(SSHConfig.max_channels),
         "Channels one SSH connection may have open at once."],
        ["ssh-max-forwards", None, str(SSHConfig.max_forwards),
         "Remote forwards (ssh -R) one SSH connection may hold."],
        ["ssh-login-grace", None, str(SSHConfig.login_grace),
         "Seconds an SSH client has from connecting to logging in."],
        ["ssh-max-auth-tries", None, str(SSHConfig.max_auth_tries),
         "Failed SSH authentication attempts before the relay hangs up."],
        ["ssh-max-refusals", None, str(SSHConfig.max_refusals),
         "Refused forward requests (ssh -R, and cancelling one) on one SSH connection before "
         "the relay hangs up (none: no limit)."],
        ["ssh-max-status-lines", None, str(SSHConfig.max_status_lines),
         "Lines (what each ssh -R published or why it was refused) one SSH connection's "
         "status display keeps; older ones are dropped."],
        ["listen-backlog", None, str(DEFAULT_BACKLOG),
         "Connections each listener (TLS, HTTP, SSH, admin) lets the kernel queue before the "
         "relay accepts them, unless its endpoint string says backlog=; the kernel caps it at "
         "net.core.somaxconn."],
        ["public-port", None, None,
         "The port share URLs name, when visitors reach the TLS port through another port "
         "(a port mapping, a load balancer) [default: the TLS port's]."],
    ]

    optFlags = [
        ["ssh-pq-only", None,
         "Offer only the post-quantum SSH key exchange (mlkem768x25519-sha256, OpenSSH 9.9 "
         "and later), dropping curve25519-sha256 for older clients."],
        ["ssh-password-auth", None,
         "Also accept an account's API key as the SSH password (public keys only otherwise)."],
    ]

    def __init__(self) -> None:
        super().__init__()
        self["names"] = []
        self.config: RelayConfig | None = None

    def opt_name(self, name: str) -> None:
        """
        Another DNS name or IP address for the relay certificate (repeatable).
        """
        self["names"].append(name)

    def postOptions(self) -> None:
        """
        Check the options and build C{self.config}.

        @raise usage.UsageError: naming the bad option.
        """
        names = tuple(self["names"])
        try:
            subject_alt_names(names)
        except PKIError as e:
            raise usage.UsageError(f"--name: {e}") from None
        tls = self["tls"]
        if tls.split(":", 1)[0].strip().lower() in _TLS_ENDPOINT_TYPES:
            raise usage.UsageError(
                f"--tls {tls!r}: the relay adds TLS itself; give a plain endpoint such as tcp:8443"
            )
        check_endpoint(tls, "--tls")
        poll = _seconds(self["revocation-poll"], "--revocation-poll")
        drain = _seconds(self["drain-timeout"], "--drain-timeout", MAX_DRAIN_TIMEOUT, zero=True)
        handshake = _seconds(
            self["handshake-timeout"], "--handshake-timeout", MAX_HANDSHAKE_TIMEOUT
        )
        try:
            shareDomain = check_share_domain(self["share-domain"])
        except ValueError as e:
            raise usage.UsageError(f"--share-domain {e}") from None
        lease = _seconds(self["lease-time"], "--lease-time", MAX_LEASE_TIME, zero=True)
        public = self["public-port"]
        if public is not None:
            if not is_port_text(str(public)) or not 1 <= int(public) <= _MAX_PORT:
                raise usage.UsageError(f"--public-port {public}: give a port, 1..{_MAX_PORT}")
            public = int(public)
        admission = AdmissionLimits(
            per_source_open=_limit(self["per-source-connections"], "--per-source-connections"),
            per_source_rate=_limit(self["per-source-rate"], "--per-source-rate", float),
            per_source_burst=_limit(self["per-source-burst"], "--per-source-burst", none=False)
            or 1,
            handshakes=_limit(self["max-handshakes"], "--max-handshakes"),
        )
        echo = self["ws-echo"]
        if echo is not None and (not echo.startswith("/") or echo == "/link"):
            raise usage.UsageError("--ws-echo: give a path such as /echo (not /link)")
        rate = _limit(self["inspect-rate"], "--inspect-rate", float)
        burst = _limit(self["inspect-burst"], "--inspect-burst", none=False)
        inspectRate = None if rate is None else (rate, burst)
        cert, key = self["cert"], self["key"]
        if (cert is None) != (key is None):
            raise usage.UsageError("--cert and --key go together")
        if cert is not None:
            try:
                RelayCertificate(cert, key)
            except PKIError as e:
                raise usage.UsageError(f"--cert/--key: {e}") from None
            cert, key = Path(cert).absolute(), Path(key).absolute()
        admin = check_endpoint(self["admin"], "--admin")
        http = self["http"]
        http = None if http.strip().lower() == "none" else check_endpoint(http, "--http")
        ssh = self["ssh"]
        ssh = None if ssh.strip().lower() == "none" else check_endpoint(ssh, "--ssh")
        sshConfig = self._sshConfig()
        dataDir = self["data-dir"]
        path = Path(os.path.expanduser(dataDir)) if dataDir else default_data_dir()
        self.config = RelayConfig(
            data_dir=path.absolute(), tls=tls, admin=admin, names=names,
            revocation_poll=poll, drain_timeout=drain, share_domain=shareDomain,
            handshake_timeout=handshake, lease_time=lease, public_port=public, http=http,
            admission=admission, max_agents=_limit(self["max-agents"], "--max-agents"),
            cert=cert, key=key, inspect_rate=inspectRate, ws_echo=echo, ssh=ssh,
            ssh_config=sshConfig, backlog=_backlog(self["listen-backlog"]),
        )


    def _sshConfig(self) -> SSHConfig:
        """
        The SSH port's limits and options.

        @raise usage.UsageError: naming the bad option.
        """
        try:
            return SSHConfig(
                window=_limit(self["ssh-window"], "--ssh-window", none=False),
                max_channels=_limit(self["ssh-max-channels"], "--ssh-max-channels", none=False),
                max_forwards=_limit(self["ssh-max-forwards"], "--ssh-max-forwards", none=False),
                login_grace=_seconds(self["ssh-login-grace"], "--ssh-login-grace"),
                max_auth_tries=_limit(self["ssh-max-auth-tries"], "--ssh-max-auth-tries",
                                      none=False),
                max_refusals=_limit(self["ssh-max-refusals"], "--ssh-max-refusals"),
                max_status_lines=_limit(self["ssh-max-status-lines"], "--ssh-max-status-lines",
                                        none=False),
                pq_only=bool(self["ssh-pq-only"]),
                password_auth=bool(self["ssh-password-auth"]),
            )
        except SSHConfigError as e:
            raise usage.UsageError(f"--ssh-...: {e}") from None


def _backlog(value: object) -> int:
    """
    C{--listen-backlog}: 1 to L{MAX_BACKLOG}.

    @raise usage.UsageError: naming the option.
    """
    backlog = _limit(value, "--listen-backlog", none=False)
    if backlog > MAX_BACKLOG:
        raise usage.UsageError(f"--listen-backlog {value}: at most {MAX_BACKLOG}")
    return int(backlog)


def _limit(value: object, option: str, kind: type = int, none: bool = True) -> Any:
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


def check_endpoint(spec: str, option: str) -> str:
    """
    Check that C{spec} is a server endpoint string Twisted can build, without
    listening (building an endpoint does not use the reactor).

    @raise usage.UsageError: naming C{option}.
    """
    if not spec or not spec.strip():
        raise usage.UsageError(f"{option}: an endpoint string is required, e.g. tcp:8443")
    try:
        serverFromString(None, spec)
    except (ValueError, TypeError, KeyError, IndexError, OSError) as e:
        raise usage.UsageError(f"{option} {spec!r}: not a usable endpoint: {e}") from None
    return spec


def buildService(config: RelayConfig, reactor: Any) -> MultiService:
    """
    The relay's service tree for C{config}, on C{reactor}.
    """
    top = MultiService()
    RelayService(config, reactor).setServiceParent(top)
    return top


def makeService(options: Options) -> MultiService:
    """
    The service twistd runs.  If the relay cannot start (a port in use, an
    unreadable key), the reason is logged and the reactor stopped.
    """
    from twisted.internet import reactor

    from nfltr.netio import tune_process

    assert options.config is not None
    top = buildService(options.config, tune_process(reactor))
    relay = top.getServiceNamed(RelayService.name)
    assert isinstance(relay, RelayService)

    def stop(_: Failure) -> None:
        reactor.callWhenRunning(reactor.stop)

    relay.whenReady().addErrback(stop)
    reload_on_sighup(relay, reactor)
    return top


def reload_on_sighup(relay: RelayService, reactor: Any) -> None:
    """
    Reload the relay's certificate on SIGHUP (from the reactor thread).
    """
    import signal

    def hup(signum: int, frame: Any) -> None:
        reactor.callFromThread(relay.reload)

    signal.signal(signal.SIGHUP, hup)
