# -*- test-case-name: tests.http -*-
"""
A streaming HTTP/1.1 reverse proxy on h11: a sans-I/O core (header
rewriting in L{nfltr.http._headers}, what is refused before it goes on in
L{nfltr.http._checks}, one visitor connection's exchange in
L{nfltr.http._exchange}) and a thin Twisted adapter (L{nfltr.http.proxy},
L{nfltr.http.flow}), with backend connections (L{nfltr.http.backend}) and a
pool of keep-alive ones (L{nfltr.http.pool}).

Two paths, chosen by the factory: the stream path (the default;
L{nfltr.http.stream} on the sans-I/O L{nfltr.http._stream}, heads read
strictly by L{nfltr.http._heads}, chunked bodies framed by
L{nfltr.http._chunked}) reads request heads only as far as the share needs
and copies every other byte as it came, holding one service connection per
visitor connection; the full proxy (C{stream=False}) parses and writes
every message again with h11.

HTTP/2 to visitors where a share ends TLS: L{nfltr.http.h2proxy} (HTTP/1.1
to the service) and L{nfltr.http.h2c} (h2c to the service, for gRPC).

Use: L{HTTPProxyFactory}C{(backend, clock, ...)}, then C{proxyFor(visitor)}
for each visitor connection (or listen on the factory directly); the backend
is an L{IBackend} or a L{BackendPool} around one.
"""

from ._checks import requestHost
from ._drain import IDrainable
from ._exchange import Exchange, Gate, Refusal
from ._io import ExchangeIO, Phase
from ._limits import (
    IDLE_TIMEOUT,
    MAX_REQUEST_HEAD_SIZE,
    MAX_RESPONSE_HEAD_SIZE,
    POOL_IDLE_TIMEOUT,
    POOL_MAX_IDLE,
    H2Limits,
    HTTPLimits,
)
from ._tap import ABORTED, COMPLETE, SWITCHED, ICapture, IExchangeTap
from .backend import BackendConnection, EndpointBackend, FunctionBackend, IBackend
from .pool import BackendPool
from .proxy import HTTPProxyFactory, HTTPProxyProtocol

__all__ = [
    "HTTPProxyFactory",
    "HTTPProxyProtocol",
    "IDrainable",
    "IBackend",
    "BackendPool",
    "BackendConnection",
    "FunctionBackend",
    "EndpointBackend",
    "HTTPLimits",
    "H2Limits",
    "MAX_REQUEST_HEAD_SIZE",
    "MAX_RESPONSE_HEAD_SIZE",
    "IDLE_TIMEOUT",
    "POOL_MAX_IDLE",
    "POOL_IDLE_TIMEOUT",
    "Exchange",
    "ExchangeIO",
    "Phase",
    "Gate",
    "Refusal",
    "requestHost",
    "ICapture",
    "IExchangeTap",
    "COMPLETE",
    "ABORTED",
    "SWITCHED",
]
