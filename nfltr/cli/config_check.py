# -*- test-case-name: tests.cli.test_config_file -*-
"""
A config file checked as its commands check their options: the relay
settings once (L{nfltr.agent.relay_settings}), each C{[[tcp]]} entry as
C{nfltr tcp PORT} would be (L{nfltr.agent.agent_options}), each C{[[http]]}
entry as C{nfltr http PORT} (L{nfltr.agent.http_option}), then the entries
together as one agent (L{check_config}).  Every problem is found, each
named by its line and key (a checker's C{--option} is the file's key).

The entries of one agent share what C{nfltr tcp} sets for all its ports
(any option of its table that is not a list, but C{e2ee}, which each entry
sets for its port): the C{[[tcp]]} entries must agree on it.  An entry
cannot take C{idle-expiry}, which ends the whole agent (C{nfltr http
--idle-expiry} does).  The variables of
share credentials (C{NFLTR_BASIC_AUTH}, C{NFLTR_BEARER}) are not read for
entries: each gives its own, in the file or in a file it names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nfltr.cli.agent_options import RELAY_OPTIONS
from nfltr.cli.config_file import (
    ENTRY_OPTIONS,
    PORT,
    TCP,
    TOP_OPTIONS,
    UDP,
    ConfigFileError,
    Entry,
    Problem,
    load_text,
    read_values,
)
from nfltr.cli.options import Option
from nfltr.cli.saved_login import apply_login

if TYPE_CHECKING:
    from nfltr.agent import AgentOptions, HttpOption, RelaySettings

#: Not for a config file's entries: it ends the whole agent.
_AGENT_ENDING = "idle-expiry"
#: AgentOptions fields the top level sets.
_TOP_FIELDS = ("name", "state_dir", "relay", "http")
_RELAY_KEYS = frozenset(o.name for o in RELAY_OPTIONS)
_ENTRY_ENVS = frozenset(o.env for opts in ENTRY_OPTIONS.values() for o in opts if o.env)


@dataclass
class Config:
    """
    A checked config file: the agent's options, and the entries they came
    from (a reload compares them).
    """

    path: Path
    options: AgentOptions
    entries: list[Entry]
    top: dict[str, Any]


def check_config(path: Path, environ: Mapping[str, str] = os.environ,
                 saved: Mapping[str, Any] | None = None) -> Config:
    """
    Read and check the config file C{path}; the relay options it lacks come
    from the C{saved} login.

    @raise ConfigFileError: every problem found.
    """
    text, mode = load_text(path)
    read = read_values(path, text, mode)
    return _checked(path, read.top, read.lines, read.entries, list(read.problems), environ,
                    saved or {})


def _checked(path: Path, top: dict[str, Any], lines: dict[str, int], entries: list[Entry],
             problems: list[Problem], environ: Mapping[str, str],
             saved: Mapping[str, Any]) -> Config:
    from nfltr.agent import ConfigError, relay_settings

    values = apply_login(top, saved, environ)
    relay: RelaySettings | None = None
    try:
        relay = relay_settings(values, environ)
    except ConfigError as e:
        # A relay option the file gave wrong is reported already: not what follows from it.
        if not any(p.key in _RELAY_KEYS for p in problems):
            problems.append(_problem(e, lines, TOP_OPTIONS, "", 1))
    base = _base(values, lines, environ, problems)
    if not entries:
        problems.append(Problem(1, None, "no entries: add [[tcp]], [[http]] or [[udp]] tables"))
    merged = _entries(entries, values.get("name"), relay, environ, problems)
    if problems or base is None or relay is None or merged is None:
        raise ConfigFileError(path, problems)
    options = replace(merged, name=base.name, state_dir=base.state_dir, relay=relay,
                      group=base.group, health=base.health)
    return Config(path, options, entries, top)


def _base(values: Mapping[str, Any], lines: Mapping[str, int], environ: Mapping[str, str],
          problems: list[Problem]) -> AgentOptions | None:
    """
    The top level's agent options (C{name}, C{state-dir}), without a relay.
    """
    from nfltr.agent import AgentOptions, ConfigError, default_state_dir, parse_health_check
    from nfltr.wire.messages import MessageError, check_name

    name, state = values.get("name"), values.get("state-dir")
    group, check = values.get("group"), values.get("health-check")
    for key, value in (("name", name), ("group", group)):
        try:
            if value is not None:
                check_name(value)
        except MessageError as e:
            problems.append(Problem(lines.get(key, 1), key, f"{key}: {e}"))
            return None
    try:
        health = None if check is None else parse_health_check(check)
    except ConfigError as e:
        problems.append(Problem(lines.get("health-check", 1), "health-check", str(e)))
        return None
    return AgentOptions(
        ports=(), name=name, e2ee=True,
        state_dir=Path(state).absolute() if state else default_state_dir(environ),
        relay=_STAND_IN.get(), group=group, health=health,
    )


def _entries(entries: Iterable[Entry], agent: str | None, relay: RelaySettings | None,
             environ: Mapping[str, str], problems: list[Problem]) -> AgentOptions | None:
    """
    The entries checked each, and together: ports and share names once
    each, what is the agent's the same for every C{[[tcp]]} entry.
    """
    from nfltr.agent import ConfigError, agent_options, http_option
    from nfltr.wire.messages import MessageError, check_name

    env = {k: v for k, v in environ.items() if k not in _ENTRY_ENVS}
    tcp: list[tuple[Entry, AgentOptions]] = []
    http: list[HttpOption] = []
    udp: dict[int, Entry] = {}
    udpParts: list[tuple[Entry, AgentOptions]] = []
    ports: dict[int, Entry] = {}
    names: dict[str | None, Entry] = {}
    for entry in entries:
        if PORT not in entry.values:
            continue
        port = entry.values[PORT]
        values = {k: v for k, v in entry.values.items() if k != PORT}
        title = f"{entry.title}: "
        try:
            if entry.kind == UDP:
                if port in udp:
                    raise _Duplicate(PORT, f"UDP port {port} is given twice (also in "
                                           f"{udp[port].title})")
                udp[port] = entry
                part = agent_options([], values, env, relay=relay or _STAND_IN.get(), udp=[port])
                udpParts.append((entry, part))
                continue
            if entry.kind == TCP:
                if port in ports:
                    raise _Duplicate(PORT, f"port {port} is given twice (also in "
                                           f"{ports[port].title})")
                ports[port] = entry
                part = agent_options([port], values, env, relay=relay or _STAND_IN.get())
                tcp.append((entry, part))
                continue
            if _AGENT_ENDING in values:
                raise _Duplicate(_AGENT_ENDING, (
                    f"{_AGENT_ENDING}: not for an entry, it would end the whole agent (run "
                    f"nfltr http --{_AGENT_ENDING} for a share that ends)"
                ))
            name = values.get("name")
            if name is not None:
                try:
                    check_name(name)
                except MessageError as e:
                    problems.append(Problem(entry.key_line("name"), "name", f"{title}name: {e}"))
            shown = name or agent or "the agent's name"
            if (name or agent) in names:
                raise _Duplicate("name", f"the share name {shown} is given twice (also in "
                                         f"{names[name or agent].title})")
            names[name or agent] = entry
            http.append(replace(http_option(port, values, env), name=name))
        except _Duplicate as e:
            problems.append(Problem(entry.key_line(e.key), e.key, f"{title}{e.message}"))
        except ConfigError as e:
            problems.append(_problem(e, entry.lines, ENTRY_OPTIONS[entry.kind], title,
                                     entry.line))
    merged = _merged(tcp, http, problems)
    return _with_udp(merged, udpParts, problems) if merged is not None else None


def _with_udp(merged: AgentOptions, parts: list[tuple[Entry, AgentOptions]],
              problems: list[Problem]) -> AgentOptions:
    """
    C{merged} with the C{[[udp]]} entries' ports, those with a public port
    first (paired in order); every entry with a public port, TCP or UDP,
    must allow the same networks (one agent has one allow list).
    """
    parts = sorted(parts, key=lambda part: not part[1].udp_public)
    allow = merged.allow if merged.public_ports else None
    for entry, part in parts:
        if not part.udp_public:
            continue
        if allow is None:
            allow = part.allow
        elif part.allow != allow:
            problems.append(Problem(entry.key_line("allow-ip"), "allow-ip", (
                f"{entry.title}: allow-ip: every entry with a public-port must give the same "
                "(one agent serves them)")))
            break
    return replace(
        merged, udp=tuple(port for _, part in parts for port in part.udp),
        udp_public=tuple(port for _, part in parts for port in part.udp_public),
        allow=allow if allow is not None else merged.allow,
    )


def _merged(tcp: list[tuple[Entry, AgentOptions]], http: list[HttpOption],
            problems: list[Problem]) -> AgentOptions | None:
    """
    The C{[[tcp]]} entries' options as one agent's: lists joined, the rest
    equal in every entry.
    """
    from nfltr.agent import AgentOptions

    if not tcp:
        return AgentOptions((), None, True, Path(), _STAND_IN.get(), tuple(http))
    # Entries with a public port first: the agent pairs its ports with its
    # public ports in order.
    tcp = sorted(tcp, key=lambda part: not part[1].public_ports)
    allows = [(entry, part.allow) for entry, part in tcp if part.public_ports]
    for entry, allow in allows[1:]:
        if allow != allows[0][1]:
            problems.append(Problem(entry.key_line("allow-ip"), "allow-ip", (
                f"{entry.title}: allow-ip: every [[tcp]] entry with a public-port must give the "
                f"same (one agent serves them; {allows[0][0].title} differs)")))
            break
    first = tcp[0][1]
    # Each entry's own: e2ee (its port is plain in an agent that ends TLS for others).
    e2ee = any(part.e2ee for _, part in tcp)
    merged: dict[str, Any] = {"e2ee": e2ee, "plain": frozenset(
        port for _, part in tcp if e2ee and not part.e2ee for port in part.ports
    )}
    merged.update(merge_fields(tcp, {*_TOP_FIELDS, *merged}, problems))
    return replace(first, http=tuple(http), **merged)


def merge_fields(parts: list[tuple[Entry, Any]], skip: Collection[str],
                 problems: list[Problem]) -> dict[str, Any]:
    """
    The fields of several entries' checked options (dataclasses of one
    kind, C{skip} left out) as one's: the tuples, joined in order (returned);
    any other field must be the same in every entry (the first entry's
    holds it), else a problem at the first entry that differs.  An option a
    command applies to each of its ports is a tuple (of ports, or of
    pairs), so its entries join; one it applies to all its ports is one
    value, which one agent can only have once.
    """
    merged: dict[str, Any] = {}
    first = parts[0][1]
    for f in fields(first):
        if f.name in skip:
            continue
        value = getattr(first, f.name)
        if isinstance(value, tuple):
            merged[f.name] = tuple(item for _, part in parts for item in getattr(part, f.name))
            continue
        key = f.name.replace("_", "-")
        for entry, part in parts[1:]:
            if getattr(part, f.name) != value:
                problems.append(Problem(entry.key_line(key), key, (
                    f"{entry.title}: {key}: every [[{entry.kind}]] entry must give the same "
                    f"(one agent serves them; {parts[0][0].title} differs)"
                )))
                break
    return merged


class _Duplicate(Exception):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(key, message)
        self.key, self.message = key, message


def _problem(error: Exception, lines: Mapping[str, int], options: Iterable[Option],
             title: str, default: int) -> Problem:
    """
    A checker's error as a problem of the file: at the line of the first
    option it names, each C{--option} spelt as the file's key.
    """
    text = str(error)
    key = None
    for option in sorted(options, key=lambda o: -len(o.name)):
        if re.search(rf"{re.escape(option.flag)}(?![\w-])", text) and option.name in lines:
            key = option.name
            break
    names = {o.name for o in options}
    text = re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)",
                  lambda m: m.group(1) if m.group(1) in names else m.group(0), text)
    return Problem(lines.get(key, default) if key else default, key, f"{title}{text}")


class _StandIn:
    """
    Relay settings to check entries with when the file's own are wrong
    (they are reported; the entries still get their checks).
    """

    settings: RelaySettings | None = None

    def get(self) -> RelaySettings:
        from nfltr.agent import relay_settings

        if self.settings is None:
            self.settings = relay_settings(
                {"relay": "localhost:1", "relay-pin": "sha256:" + "0" * 64, "key": "stand-in",
                 "transport": "link"}, {},
            )
        return self.settings


_STAND_IN = _StandIn()


def check_path(path: Path, environ: Mapping[str, str] = os.environ,
               saved: Mapping[str, Any] | None = None) -> list[str]:
    """
    The lines C{nfltr check} prints for C{path}: its problems, or none.
    """
    try:
        check_config(path, environ, saved)
    except ConfigFileError as e:
        return e.lines()
    return []
