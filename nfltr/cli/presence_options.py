# -*- test-case-name: tests.relay.cluster.test_config -*-
"""
A replica's presence options (C{--presence-...}, docs/replicas.md): rows of
L{nfltr.cli.relay_options}'s table, and the L{ReplicaConfig} fields they
fill (L{presence_settings}).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from twisted.python import usage

from nfltr.cli.options import Option
from nfltr.relay.cluster.config import (
    DEFAULT_PRESENCE_CACHE_ENTRIES,
    DEFAULT_PRESENCE_STALE_LIMIT,
    DEFAULT_PRESENCE_TTL,
    MAX_PRESENCE_CACHE_ENTRIES,
    MAX_PRESENCE_STALE_LIMIT,
    MAX_PRESENCE_TTL,
    MIN_PRESENCE_TTL,
)


def _seconds(value: object, option: str, least: float, most: float) -> float:
    try:
        number = float(str(value))
    except ValueError:
        number = float("nan")
    if not least <= number <= most:  # NaN fails
        raise usage.UsageError(f"{option} {value}: give seconds, {least:g} to {most:g}")
    return number


def _ttl(value: object, option: str) -> float:
    return _seconds(value, option, MIN_PRESENCE_TTL, MAX_PRESENCE_TTL)


def _staleLimit(value: object, option: str) -> float:
    return _seconds(value, option, 0.0, MAX_PRESENCE_STALE_LIMIT)


def _entries(value: object, option: str) -> int:
    text = str(value).strip()
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_PRESENCE_CACHE_ENTRIES):
        raise usage.UsageError(
            f"{option} {value}: give a number from 1 to {MAX_PRESENCE_CACHE_ENTRIES}")
    return int(text)


PRESENCE_RELAY_OPTIONS: tuple[Option, ...] = (
    Option("presence-ttl", None,
           "Seconds a replica's presence records (its agents, shares and replica-link address) "
           "live in the directory without a refresh (every third of it): a replica that dies "
           "is routed to for at most this long.", str(DEFAULT_PRESENCE_TTL), parse=_ttl),
    Option("presence-stale-limit", None,
           "While the directory cannot answer, visitors of agents and shares other replicas "
           "hold are routed by the presence record this replica last read or wrote for the "
           "name, the replica that holds an agent takes a forwarded session's API key it "
           "checked (and has not seen revoked), and an SSH key this replica checked (and has "
           "not seen removed) logs in, if at most this many seconds old; names and keys not "
           "seen within it fail until the directory answers (0: none of them).",
           f"{DEFAULT_PRESENCE_STALE_LIMIT:g}", parse=_staleLimit),
    Option("presence-cache-entries", None,
           "Presence records, API keys and SSH keys a replica remembers for "
           "--presence-stale-limit, at most each (the least recently used go first).",
           str(DEFAULT_PRESENCE_CACHE_ENTRIES), parse=_entries),
)


def presence_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """
    The presence fields of L{nfltr.relay.cluster.config.ReplicaConfig}, from
    the parsed values of L{PRESENCE_RELAY_OPTIONS} (keyed by option name).
    """
    return {"presence_ttl": values["presence-ttl"],
            "presence_stale_limit": values["presence-stale-limit"],
            "presence_cache_entries": values["presence-cache-entries"]}
