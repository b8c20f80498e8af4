# -*- test-case-name: tests.agent.test_settings -*-
"""
The options of C{nfltr tcp PORT...} and C{twistd nfltr-agent tcp PORT...}
(declared for the command line in L{nfltr.cli.agent_options}), checked in one
place.  Checking reads nothing but the relay's CA file;
L{nfltr.agent.prepare_agent} then creates the state (name, key).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nfltr.resume import DEFAULT_RESUME_TIMEOUT, check_resume_timeout
from nfltr.tls import TICKET_LIFETIME
from nfltr.wire.h2limits import parse_h2_limits
from nfltr.wire.messages import (
    E2EE,
    MAX_HTTP_SHARES,
    MAX_SHARES,
    NAME_PATTERN,
    MessageError,
    TcpShare,
    check_name,
    parse_port,
)
from nfltr.wire.policy import (
    Network,
    PolicyError,
    SharePolicy,
    parse_networks,
    policy_from_options,
)
from nfltr.wire.udp import MAX_UDP_SHARES, UdpShare

from ._expiry import parse_idle_expiry
from ._health import HealthCheck, parse_health_check
from ._inspect_ui import parse_inspect_keep, parse_inspect_ui
from ._names import default_state_dir
from ._proxy import proxy_version
from ._secrets import BASIC_AUTH_ENV, BEARER_ENV, secret_lines, sourced_secret
from ._settings import ConfigError, RelaySettings, parse_bool, relay_settings
from ._shares import HttpOption, check_http_option, check_policy


@dataclass(frozen=True)
class AgentOptions:
    """
    A checked agent command line.
    """

    ports: tuple[int, ...]
    name: str | None
    e2ee: bool
    state_dir: Path
    relay: RelaySettings
    http: tuple[HttpOption, ...] = ()
    public_ports: tuple[int, ...] = ()
    allow: tuple[Network, ...] = ()
    proxy_protocol: str | None = None
    #: Seconds a suspended resumable session waits for the connector (C{--resume-timeout}).
    resume_timeout: float = DEFAULT_RESUME_TIMEOUT
    #: Ports shared without end-to-end TLS although C{e2ee} is true (a
    #: config file's C{[[tcp]]} entries with C{e2ee = false}).
    plain: frozenset[int] = frozenset()
    #: The load-balancing group (C{--group}; L{nfltr.relay.groups}).
    group: str | None = None
    #: The service's health check (C{--health-check}; L{nfltr.agent._health}).
    health: HealthCheck | None = None
    #: Seconds an end-to-end tunnel's TLS ticket resumes, and its ticket
    #: key is used (L{nfltr.tls.TICKET_LIFETIME}); 0: no resumption.
    ticket_lifetime: int = TICKET_LIFETIME
    #: The UDP ports shared (C{nfltr udp}, a config file's C{[[udp]]}).
    udp: tuple[int, ...] = ()
    #: Their public ports (C{nfltr udp --public-port}), in order; C{allow}
    #: is their visitors' when the agent shares no TCP port.
    udp_public: tuple[int, ...] = ()

    def tcp_shares(self) -> list[TcpShare]:
        """
        The shared ports as the hello declares them.
        """
        public = dict(zip(self.ports, self.public_ports, strict=False))
        addressed = self.proxy_protocol is not None
        return [TcpShare(port, self.e2ee and port not in self.plain, public.get(port),
                         self.allow if port in public else (), addressed)
                for port in self.ports]

    def udp_shares(self) -> list[UdpShare]:
        """
        The shared UDP ports as the hello declares them.
        """
        public = dict(zip(self.udp, self.udp_public, strict=False))
        return [UdpShare(port, public.get(port), self.allow if port in public else ())
                for port in self.udp]


def resume_timeout(value: Any) -> float:
    """
    C{--resume-timeout}'s value in seconds (default L{DEFAULT_RESUME_TIMEOUT}).

    @raise ConfigError: not a number within its bounds.
    """
    if value is None:
        return DEFAULT_RESUME_TIMEOUT
    try:
        return check_resume_timeout(float(value))
    except ValueError as e:
        raise ConfigError(f"--resume-timeout {value}: {e}") from None


def agent_options(
    ports: Sequence[str | int], values: Mapping[str, str | None],
    environ: Mapping[str, str] = os.environ, http: Sequence[HttpOption] = (),
    relay: RelaySettings | None = None, udp: Sequence[str | int] = (),
) -> AgentOptions:
    """
    Check an agent's ports and options (keyed by option name: C{name},
    C{e2ee}, C{state-dir} and the relay's; a missing or L{None} value takes
    its default).

    @param ports: the TCP ports to share.
    @param http: the share URLs to publish (L{http_option} checked them).
    @param relay: the relay settings, when already checked (a config file's).
    @param udp: the UDP ports to share.
    @raise ConfigError: what is wrong, for the user.
    """
    if not ports and not http and not udp:
        raise ConfigError("give the port of the local service to share")
    if len([option for option in http if option.name is None]) > 1:
        raise ConfigError("one share URL per agent: it is named as the agent")
    if len(http) > MAX_HTTP_SHARES:
        raise ConfigError(f"at most {MAX_HTTP_SHARES} share URLs")
    if len(ports) > MAX_SHARES:
        raise ConfigError(f"at most {MAX_SHARES} ports")
    checked = []
    try:
        for port in ports:
            text = str(port)
            checked.append(parse_port(text))
        name = values.get("name")
        if name is not None:
            check_name(name)
        group = values.get("group")
    except MessageError as e:
        raise ConfigError(str(e)) from None
    if len(set(checked)) != len(checked):
        raise ConfigError("a port is given twice")
    udpPorts = _udp_ports(udp)
    udpPublic: tuple[int, ...] = ()
    state = values.get("state-dir")
    public: tuple[int, ...] = ()
    if udpPorts and not checked and not http:
        # nfltr udp: --public-port and --allow-ip are its UDP ports'.
        udpPublic, allow = _public_ports(udpPorts, values)
    else:
        public, allow = _public_ports(checked, values) if not http else ((), ())
    return AgentOptions(
        ports=tuple(checked),
        name=name,
        e2ee=parse_bool(values.get("e2ee") or "true", "--e2ee"),
        state_dir=Path(state).absolute() if state else default_state_dir(environ),
        relay=relay if relay is not None else relay_settings(values, environ),
        http=tuple(http),
        public_ports=public,
        allow=allow,
        proxy_protocol=proxy_version(values.get("proxy-protocol")) if not http else None,
        group=_group(group),
        health=_health(values.get("health-check")),
        ticket_lifetime=ticket_lifetime(values.get("tls-ticket-lifetime")),
        udp=udpPorts,
        udp_public=udpPublic,
        resume_timeout=resume_timeout(values.get("resume-timeout")),
    )


def _group(group: str | None) -> str | None:
    """
    C{--group}, if given: a name like an agent's.

    @raise ConfigError: what is wrong.
    """
    if group is not None and not NAME_PATTERN.fullmatch(group):
        raise ConfigError(f"--group {group[:40]!r}: use 1-63 lowercase letters, digits and "
                          "hyphens, not starting or ending with a hyphen")
    return group


def _health(text: str | None) -> HealthCheck | None:
    """
    C{--health-check}, if given.

    @raise ConfigError: what is wrong.
    """
    return None if text is None else parse_health_check(text)


#: The longest C{--tls-ticket-lifetime}: a day.
MAX_TICKET_LIFETIME = 86400


def ticket_lifetime(text: str | None) -> int:
    """
    Read C{--tls-ticket-lifetime}: whole seconds, 0 (no resumption) to
    L{MAX_TICKET_LIFETIME}; L{None}: the default.

    @raise ConfigError: not such a number.
    """
    if text is None:
        return TICKET_LIFETIME
    number = int(text) if text.strip().isdigit() else -1
    if not 0 <= number <= MAX_TICKET_LIFETIME:
        raise ConfigError(
            f"--tls-ticket-lifetime {text!r}: give whole seconds, 0 (no resumption) to"
            f" {MAX_TICKET_LIFETIME}"
        )
    return number


def _udp_ports(udp: Sequence[str | int]) -> tuple[int, ...]:
    """
    The UDP ports to share, checked.

    @raise ConfigError: what is wrong.
    """
    if len(udp) > MAX_UDP_SHARES:
        raise ConfigError(f"at most {MAX_UDP_SHARES} UDP ports")
    try:
        ports = tuple(parse_port(str(port)) for port in udp)
    except MessageError as e:
        raise ConfigError(str(e)) from None
    if len(set(ports)) != len(ports):
        raise ConfigError("a UDP port is given twice")
    return ports


def _public_ports(
    ports: Sequence[int], values: Mapping[str, Any],
) -> tuple[tuple[int, ...], tuple[Network, ...]]:
    """
    C{--public-port} (one for each of C{ports}, in order, 0 for any) and
    the C{--allow-ip} networks of their visitors.

    @raise ConfigError: what is wrong.
    """
    given = list(values.get("public-port") or [])
    if len(given) > len(ports):
        raise ConfigError("--public-port: one for each PORT at most, in the same order")
    public = []
    for text in given:
        if str(text).strip() == "0":
            public.append(0)
            continue
        try:
            public.append(parse_port(str(text).strip()))
        except MessageError:
            raise ConfigError(f"--public-port {text}: give a port, 1..65535, or 0 for any free "
                              "one") from None
    allow = values.get("allow-ip") or []
    if allow and not public:
        raise ConfigError("--allow-ip: only for --public-port (tcp-connect clients have keys)")
    try:
        return tuple(public), parse_networks(list(allow))
    except PolicyError as e:
        raise ConfigError(str(e)) from None


def http_option(port: str | int, values: Mapping[str, Any],
                environ: Mapping[str, str] = os.environ) -> HttpOption:
    """
    Check C{nfltr http PORT}'s port, C{--mode}, C{--host-header} and
    policy; the credentials may also come from files and the environment
    (L{nfltr.agent._secrets}).

    @raise ConfigError: what is wrong.
    """
    text = str(port)
    try:
        checked = parse_port(text)
    except MessageError as e:
        raise ConfigError(str(e)) from None
    plain = parse_bool(values.get("plain-http") or "false", "--plain-http")
    policy = _policy(values, environ)
    option = check_http_option(checked, values.get("mode"), values.get("host-header"), plain,
                               values.get("service-protocol"))
    proxy = proxy_version(values.get("proxy-protocol"))
    if proxy is not None:
        option = replace(option, proxy_protocol=proxy)
    limits = values.get("h2-limits")
    if limits is not None:
        if option.mode != E2EE:
            raise ConfigError("--h2-limits: the agent ends TLS in e2ee only (an inspect share's "
                              "are the relay's --h2-limits)")
        try:
            option = replace(option, h2_limits=parse_h2_limits(limits))
        except ValueError as e:
            raise ConfigError(f"--h2-limits: {e}") from None
    idle = values.get("idle-expiry")
    if idle is not None:
        option = replace(option, idle_expiry=parse_idle_expiry(idle))
    option = replace(option, inspect_ui=parse_inspect_ui(values.get("inspect-ui")),
                     inspect_keep=parse_inspect_keep(values.get("inspect-requests"),
                                                     values.get("inspect-body")))
    return check_policy(option, policy)


def _policy(values: Mapping[str, Any], environ: Mapping[str, str]) -> SharePolicy:
    """
    The share's policy; a bad credential read from a file or a variable is
    named by where it came from.

    @raise ConfigError: what is wrong.
    """
    basic, basicFrom = sourced_secret(values, environ, "basic-auth", BASIC_AUTH_ENV)
    bearer, bearerFrom = sourced_secret(values, environ, "bearer", BEARER_ENV)
    headers: list[tuple[str, str | None]] = [
        (h, None) for h in values.get("require-header") or []
    ]
    headers += secret_lines(values, "require-header")
    _attributed(basicFrom, lambda: policy_from_options(basic, None, [], []))
    _attributed(bearerFrom, lambda: policy_from_options(None, bearer, [], []))
    for header, where in headers:
        _attributed(where, functools.partial(policy_from_options, None, None, [header], []))
    return _attributed(None, lambda: policy_from_options(
        basic, bearer, [h for h, _ in headers], values.get("allow-ip") or [],
    ))


def _attributed(where: str | None, check: Callable[[], Any]) -> Any:
    """
    C{check()}, its L{PolicyError} a L{ConfigError}, which starts with
    C{where} the value came from, if not from the command line.
    """
    try:
        return check()
    except PolicyError as e:
        raise ConfigError(str(e) if where is None else f"{where}: {e}") from None


def http_agent_options(
    port: str | int, values: Mapping[str, Any], environ: Mapping[str, str] = os.environ
) -> AgentOptions:
    """
    The options of C{nfltr http PORT}: one share URL, no TCP port.

    @raise ConfigError: what is wrong.
    """
    return agent_options([], values, environ, http=[http_option(port, values, environ)])
