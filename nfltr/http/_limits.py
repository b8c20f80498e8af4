# -*- test-case-name: tests.http.test_exchange,tests.http.test_h2limits -*-
"""
The limits of the HTTP proxy: one frozen L{HTTPLimits} with a safe default
for each, C{None} meaning "no limit"; those of HTTP/2 (L{H2Limits}) are
L{nfltr.wire.h2limits}'.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from nfltr.wire.h2limits import DEFAULT_H2_LIMITS, H2Limits

#: Bytes a request head (request line and headers) may take.
MAX_REQUEST_HEAD_SIZE = 64 * 1024
#: Bytes a backend's response head may take.
MAX_RESPONSE_HEAD_SIZE = 64 * 1024
#: Seconds a visitor connection may wait for (the whole of) its next request head.
IDLE_TIMEOUT = 60.0
#: Seconds a request in flight may go without a byte moving either way
#: (from the visitor, from the backend, or drained by the visitor).
EXCHANGE_TIMEOUT = 300.0
#: Requests of one visitor connection the stream path sends on before their
#: responses are out (pipelining).
MAX_PIPELINED = 16
#: Idle keep-alive connections a pool keeps per backend.
POOL_MAX_IDLE = 64
#: Seconds an idle pooled connection is kept before it is closed.
POOL_IDLE_TIMEOUT = 30.0


@dataclass(frozen=True)
class HTTPLimits:
    """
    The limits of one proxy and its pools.

    @ivar max_request_head_size: bytes a visitor's request head may take
        (h11's C{max_incomplete_event_size}): a larger one is answered with
        C{431}.  It also bounds what a pipelining visitor may send ahead:
        beyond it the visitor connection stops being read until its current
        response is out.
    @ivar max_response_head_size: bytes a backend's response head may take;
        a larger one is answered with C{502}.
    @ivar idle_timeout: seconds a visitor connection may wait for its next
        request head, counted from the connection or the end of the previous
        response until the whole head has arrived (so a head trickled byte
        by byte is cut too).
    @ivar exchange_timeout: seconds a request in flight may go without a
        byte moving either way (read from the visitor or the backend, or
        drained by the visitor): then the backend connection is dropped and
        the visitor gets C{504}, or its connection is cut if its response
        had begun.  A slow response is not cut as long as bytes move.
    @ivar max_pipelined: requests of one visitor connection the stream path
        (L{nfltr.http._stream}) sends to the service before their responses
        are out; beyond that the visitor is not read until one is.
    @ivar pool_max_idle: idle keep-alive connections a pool keeps; beyond
        that the oldest is closed.
    @ivar pool_idle_timeout: seconds an idle pooled connection is kept.
    """

    max_request_head_size: int | None = MAX_REQUEST_HEAD_SIZE
    max_response_head_size: int | None = MAX_RESPONSE_HEAD_SIZE
    idle_timeout: float | None = IDLE_TIMEOUT
    exchange_timeout: float | None = EXCHANGE_TIMEOUT
    pool_max_idle: int | None = POOL_MAX_IDLE
    max_pipelined: int = MAX_PIPELINED
    pool_idle_timeout: float | None = POOL_IDLE_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("max_request_head_size", "max_response_head_size", "pool_max_idle"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                raise ValueError(f"{name} must be a non-negative integer or None, not {value!r}")
        if type(self.max_pipelined) is not int or self.max_pipelined < 1:
            raise ValueError(
                f"max_pipelined must be a positive integer, not {self.max_pipelined!r}")
        for name in ("idle_timeout", "exchange_timeout", "pool_idle_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive or None, not {value!r}")

    @property
    def requestHeadSize(self) -> int:
        """
        L{max_request_head_size} as h11 takes it (no limit: the largest int).
        """
        return _orMax(self.max_request_head_size)

    @property
    def responseHeadSize(self) -> int:
        """
        L{max_response_head_size} as h11 takes it (no limit: the largest int).
        """
        return _orMax(self.max_response_head_size)


def _orMax(value: int | None) -> int:
    return sys.maxsize if value is None else value


#: The defaults.
DEFAULT_LIMITS = HTTPLimits()


#: The HTTP/2 limits live with the vocabulary every role shares, so the
#: command line can read them without loading the proxy.
__all__ = ["DEFAULT_H2_LIMITS", "DEFAULT_LIMITS", "H2Limits", "HTTPLimits"]
