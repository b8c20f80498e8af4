# -*- test-case-name: tests.relay.test_tap -*-
"""
The relay's options for the limits of its API and dashboard (on the admin
listener, L{nfltr.relay.api}), and the L{ApiLimits} they make.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from twisted.python import usage

from nfltr.cli.options import Option
from nfltr.relay.config import DEFAULT_API_LIMITS, ApiLimits

#: The longest interval the API's limits accept (seconds).
MAX_API_INTERVAL = 3600.0


def _count(value: object, option: str) -> int:
    text = str(value).strip()
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise usage.UsageError(f"{option} {value}: give a number more than 0")
    return int(text)


def _seconds(value: object, option: str, limit: float) -> float:
    try:
        number = float(str(value))
    except ValueError:
        number = float("nan")
    if not 0 < number <= limit:  # NaN fails
        raise usage.UsageError(
            f"{option} {value}: give seconds, more than 0 and at most {limit:g}")
    return number


_interval = partial(_seconds, limit=MAX_API_INTERVAL)

API_RELAY_OPTIONS: tuple[Option, ...] = (
    Option("admin-failure-burst", None,
           "Failed authentications (admin tokens, dashboard logins) one source address may "
           "make at once on the admin listener ...", str(DEFAULT_API_LIMITS.failure_burst),
           parse=_count),
    Option("admin-failure-interval", None,
           "... and then one every this many seconds; more get 429.",
           str(DEFAULT_API_LIMITS.failure_interval), parse=_interval),
    Option("dashboard-sessions", None,
           "Dashboard logins held at once (the oldest ended first).",
           str(DEFAULT_API_LIMITS.sessions), parse=_count),
    Option("dashboard-streams", None,
           "Live-update streams (dashboards open in browsers) at once; more get 503.",
           str(DEFAULT_API_LIMITS.streams), parse=_count),
    Option("dashboard-interval", None,
           "Seconds between the dashboard's live updates (each one is a snapshot of every "
           "agent, share and session).", str(DEFAULT_API_LIMITS.interval), parse=_interval),
)


def api_limits(values: Mapping[str, Any]) -> ApiLimits:
    """
    The API's limits from the parsed values of L{API_RELAY_OPTIONS}.
    """
    return ApiLimits(
        failure_burst=values["admin-failure-burst"],
        failure_interval=values["admin-failure-interval"],
        sessions=values["dashboard-sessions"], streams=values["dashboard-streams"],
        interval=values["dashboard-interval"],
    )
