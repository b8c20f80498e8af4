# -*- test-case-name: tests.relay.cluster.test_service -*-
"""
Small pieces for the relay's Deferred chains.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def passing(call: Callable[[], object]) -> Callable[[Any], Any]:
    """
    A callback (and errback) that calls C{call} and passes the result on.
    """

    def run(result: Any) -> Any:
        call()
        return result

    return run
