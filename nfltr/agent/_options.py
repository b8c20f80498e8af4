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
from nfltr.wire.messages import (
    MAX_HTTP_SHARES,
    MAX_SHARES,
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

from ._expiry import parse_idle_expiry
from ._inspect_ui import parse_inspect_ui
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

    def tcp_shares(self) -> list[TcpShare]:
        """
        The shared ports as the hello declares them.
        """
        public = dict(zip(self.ports, self.public_ports, strict=False))
        addressed = self.proxy_protocol is not None
        return [TcpShare(port, self.e2ee and port not in self.plain, public.get(port),
                         self.allow if port in public else (), addressed)
                for port in self.ports]


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
    relay: RelaySettings | None = None,
) -> AgentOptions:
    """
    Check an agent's ports and options (keyed by option name: C{name},
    C{e2ee}, C{state-dir} and the relay's; a missing or L{None} value takes
    its default).

    @param ports: the TCP ports to share.
    @param http: the share URLs to publish (L{http_option} checked them).
    @param relay: the relay settings, when already checked (a config file's).
    @raise ConfigError: what is wrong, for the user.
    """
    if not ports and not http:
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
    except MessageError as e:
        raise ConfigError(str(e)) from None
    if len(set(checked)) != len(checked):
        raise ConfigError("a port is given twice")
    state = values.get("state-dir")
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
        resume_timeout=resume_timeout(values.get("resume-timeout")),
    )


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
    option = check_http_option(checked, values.get("mode"), values.get("host-header"), plain)
    proxy = proxy_version(values.get("proxy-protocol"))
    if proxy is not None:
        option = replace(option, proxy_protocol=proxy)
    idle = values.get("idle-expiry")
    if idle is not None:
        option = replace(option, idle_expiry=parse_idle_expiry(idle))
    option = replace(option, inspect_ui=parse_inspect_ui(values.get("inspect-ui")))
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
