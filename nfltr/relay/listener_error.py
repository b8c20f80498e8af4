# -*- test-case-name: tests.relay.test_service -*-
"""
The error of a relay listener that could not be bound.
"""

from __future__ import annotations

from twisted.internet.error import CannotListenError


class ListenerError(CannotListenError):
    """
    A listener of the relay could not be bound: says which option, its
    endpoint string, and why (C{--http tcp:8080: address already in use}).
    """

    def __init__(self, option: str, spec: str, cause: CannotListenError) -> None:
        super().__init__(cause.interface, cause.port, cause.socketError)
        self.option = option
        self.spec = spec

    def __str__(self) -> str:
        error = self.socketError
        why = getattr(error, "strerror", None) or str(error)
        return f"{self.option} {self.spec}: {why[:1].lower()}{why[1:]}"
