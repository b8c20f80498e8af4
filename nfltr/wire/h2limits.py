# -*- test-case-name: tests.wire.test_h2limits -*-
"""
The limits of HTTP/2 where a share ends TLS (L{nfltr.http.h2proxy}, and h2c
to the service: L{nfltr.http.h2c}): one frozen L{H2Limits} with a safe
default for each, and L{parse_h2_limits} for the command line and the
configuration file (C{--h2-limits NAME=VALUE,...}, the names those of
L{H2Limits} with dashes).  Here, not in L{nfltr.http}, so an agent or relay
reads them without loading the proxy.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

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
#: (SETTINGS_INITIAL_WINDOW_SIZE); with h2c to the service, also what each
#: service stream's window for response bytes is widened to.
H2_INITIAL_WINDOW = 1024 * 1024
#: The visitor connection's window for all its streams' request bodies
#: together (raised by a WINDOW_UPDATE on stream 0 after the preface): what
#: one visitor connection can make the share hold for services that do not
#: read; with h2c, also what its streams' service windows are widened by in all.
H2_CONNECTION_WINDOW = 4 * 1024 * 1024
#: The least window HTTP/2 starts a connection with (RFC 9113 section 6.9.2):
#: a connection's window can only be raised from it.
H2_DEFAULT_WINDOW = 65_535
#: h2c connections to the service (C{--service-protocol h2c}) a pool holds.
H2_SERVICE_CONNECTIONS = 4
#: Streams one h2c connection to the service carries at once (fewer if the
#: service says so).
H2_SERVICE_STREAMS = 100
#: Seconds an h2c connection to the service is kept open with no stream on it.
H2_SERVICE_IDLE_TIMEOUT = 30.0


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
        the visitor's window before the service connection is paused; with
        h2c to the service, each service stream's window before it is
        widened (C{initial_window}).
    @ivar initial_window: each stream's window for request bytes; they are
        acknowledged once written to the service.  With h2c to the
        service, also each service stream's window for response bytes
        (it starts at C{max_stream_buffer} and is widened to this while
        C{connection_window} allows); a service connection's own window is
        C{service_streams} of them.
    @ivar connection_window: the visitor connection's window for all its
        streams' request bytes together (at least 65,535, HTTP/2's own):
        what one visitor connection can make the share hold for services
        that do not read.  With h2c, also the most its streams' service
        windows are widened by together: what a visitor that reads nothing
        makes the share hold beyond C{max_stream_buffer} per stream.
    @ivar service_connections: h2c connections to the service a pool holds
        (C{--service-protocol h2c}); a stream finding them all full is
        answered C{503}.
    @ivar service_streams: streams each h2c connection to the service
        carries at once (fewer if the service says so).
    @ivar service_idle_timeout: seconds an h2c connection to the service
        is kept with no stream on it before it is closed (C{GOAWAY});
        L{None}: until the service closes it.
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
    connection_window: int = H2_CONNECTION_WINDOW
    service_idle_timeout: float | None = H2_SERVICE_IDLE_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("max_concurrent_streams", "max_header_list_size", "max_header_block_size",
                     "max_header_block_frames", "max_resets", "max_control_frames",
                     "max_stream_buffer", "initial_window", "service_connections",
                     "service_streams", "connection_window"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        if not self.rate_window > 0:
            raise ValueError(f"rate_window must be positive, not {self.rate_window!r}")
        if self.service_idle_timeout is not None and not self.service_idle_timeout > 0:
            raise ValueError("service_idle_timeout must be positive or None, "
                             f"not {self.service_idle_timeout!r}")
        for name in ("initial_window", "max_stream_buffer", "connection_window"):
            if getattr(self, name) > 2**31 - 1:
                raise ValueError(f"{name} must be at most 2**31 - 1")
        if self.connection_window < H2_DEFAULT_WINDOW:
            raise ValueError(f"connection_window must be at least {H2_DEFAULT_WINDOW}")


#: The HTTP/2 defaults.
DEFAULT_H2_LIMITS = H2Limits()


def parse_h2_limits(text: str, base: H2Limits = DEFAULT_H2_LIMITS) -> H2Limits:
    """
    C{base} with the limits C{text} names changed: C{NAME=VALUE} pairs
    separated by commas (C{max-concurrent-streams=50,rate-window=5});
    C{service-idle-timeout=none} for no idle timeout.

    @raise ValueError: an unknown name or a bad value, saying which.
    """
    kinds = {f.name.replace("_", "-"): f.name for f in fields(H2Limits)}
    changes: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, equals, value = part.partition("=")
        name = name.strip().lower()
        if not equals or name not in kinds:
            raise ValueError(f"{part!r}: give NAME=VALUE, NAME one of {', '.join(kinds)}")
        key = kinds[name]
        try:
            changes[key] = _value(key, value)
        except ValueError:
            raise ValueError(f"{name}={value}: not a number") from None
    try:
        return replace(base, **changes)
    except ValueError as e:
        raise ValueError(str(e).replace("_", "-")) from None


def _value(key: str, value: str) -> float | int | None:
    """
    C{value} as limit C{key} takes it.
    """
    if key == "service_idle_timeout" and value.strip().lower() == "none":
        return None
    if key in ("rate_window", "service_idle_timeout"):
        return float(value)
    return int(value)
