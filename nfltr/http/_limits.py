# -*- test-case-name: tests.http.test_exchange,tests.http.test_h2limits -*-
"""
The limits of the HTTP proxy: one frozen L{HTTPLimits} with a safe default
for each, C{None} meaning "no limit".
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

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


#: Streams one HTTP/2 visitor connection may have open at once.
H2_MAX_CONCURRENT_STREAMS = 100
#: Bytes a decoded HTTP/2 header list may take (RFC 9113 SETTINGS_MAX_HEADER_LIST_SIZE).
H2_MAX_HEADER_LIST_SIZE = 64 * 1024
#: Bytes of one header block's frames (HEADERS and its CONTINUATIONs) as they come.
H2_MAX_HEADER_BLOCK_SIZE = 128 * 1024
#: Frames one header block may take (a HEADERS and its CONTINUATIONs).
H2_MAX_HEADER_BLOCK_FRAMES = 32
#: Streams in flight a visitor may reset (RST_STREAM) per window before it is cut off.
H2_MAX_RESETS = 200
#: SETTINGS and PING frames (not acknowledgements) a visitor may send per window.
H2_MAX_CONTROL_FRAMES = 100
#: The window, in seconds, the two counts above are taken over.
H2_RATE_WINDOW = 10.0
#: Bytes of a response the proxy holds per stream while the visitor's
#: window is shut, before it stops reading the service connection.
H2_MAX_STREAM_BUFFER = 64 * 1024
#: The window each stream opens with for the visitor's request body
#: (SETTINGS_INITIAL_WINDOW_SIZE).
H2_INITIAL_WINDOW = 64 * 1024
#: h2c connections to the service (C{--service-protocol h2c}) a pool holds.
H2_SERVICE_CONNECTIONS = 4
#: Streams one h2c connection to the service carries at once (fewer if the
#: service says so).
H2_SERVICE_STREAMS = 100


@dataclass(frozen=True)
class H2Limits:
    """
    The limits of HTTP/2 to visitors (L{nfltr.http.h2proxy}).  A visitor
    that breaks one of the connection's limits gets a C{GOAWAY} with
    C{ENHANCE_YOUR_CALM} (a protocol error: C{PROTOCOL_ERROR}, a header
    list too large: C{COMPRESSION_ERROR} from h2) and its connection is
    closed; streams beyond C{max_concurrent_streams} are refused alone.

    @ivar max_concurrent_streams: streams open at once (advertised, and
        each stream over it reset with C{REFUSED_STREAM}); each takes one
        service connection.
    @ivar max_header_list_size: bytes of a decoded header list.
    @ivar max_header_block_size: bytes of one header block's frames
        (checked from the frame headers, before the bytes are held): the
        CONTINUATION flood.
    @ivar max_header_block_frames: frames of one header block.
    @ivar max_resets: streams the visitor resets (RST_STREAM) while their
        request is in flight, per C{rate_window}
        (rapid reset).
    @ivar max_control_frames: SETTINGS and PING frames (acknowledgements
        not counted) per C{rate_window} (SETTINGS/PING flood).
    @ivar rate_window: seconds the two rates are counted over.
    @ivar max_stream_buffer: bytes of response held per stream waiting for
        the visitor's window before the service connection is paused.
    @ivar initial_window: each stream's window for request bytes; they are
        acknowledged once written to the service.
    @ivar service_connections: h2c connections to the service a pool holds
        (C{--service-protocol h2c}); a stream finding them all full is
        answered C{503}.
    @ivar service_streams: streams each h2c connection to the service
        carries at once (fewer if the service says so).
    """

    max_concurrent_streams: int = H2_MAX_CONCURRENT_STREAMS
    max_header_list_size: int = H2_MAX_HEADER_LIST_SIZE
    max_header_block_size: int = H2_MAX_HEADER_BLOCK_SIZE
    max_header_block_frames: int = H2_MAX_HEADER_BLOCK_FRAMES
    max_resets: int = H2_MAX_RESETS
    max_control_frames: int = H2_MAX_CONTROL_FRAMES
    rate_window: float = H2_RATE_WINDOW
    max_stream_buffer: int = H2_MAX_STREAM_BUFFER
    initial_window: int = H2_INITIAL_WINDOW
    service_connections: int = H2_SERVICE_CONNECTIONS
    service_streams: int = H2_SERVICE_STREAMS

    def __post_init__(self) -> None:
        for name in ("max_concurrent_streams", "max_header_list_size", "max_header_block_size",
                     "max_header_block_frames", "max_resets", "max_control_frames",
                     "max_stream_buffer", "initial_window", "service_connections",
                     "service_streams"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        if not self.rate_window > 0:
            raise ValueError(f"rate_window must be positive, not {self.rate_window!r}")
        for name in ("initial_window", "max_stream_buffer"):
            if getattr(self, name) > 2**31 - 1:
                raise ValueError(f"{name} must be at most 2**31 - 1")


#: The HTTP/2 defaults.
DEFAULT_H2_LIMITS = H2Limits()
