# -*- test-case-name: tests.relay.test_redirect -*-
"""
The relay's HTTP port (C{--http}, C{tcp:8080} by default): every request is
answered with a permanent redirect (C{308}, which keeps the method and the
body) to the same host and path on the HTTPS port, so a visitor who typed
C{http://blog.example.com:8080/} lands on the share.

The host is taken from the request's C{Host} header when it is a well-formed
host name or address, else the relay's first name; the port is the TLS
port's public port.  Nothing is proxied: no share is reachable in plain
text.  No access log, no traceback in responses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from twisted.web import resource, server
from twisted.web.server import Request

_HOST = re.compile(rb"(?P<host>[A-Za-z0-9.\-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")
HTTPS_PORT = 443
REDIRECT_BODY = b"this service is served over HTTPS\n"


def https_location(host: bytes | None, fallback: str, port: int, uri: bytes) -> bytes:
    """
    The HTTPS URL for a request to C{host} (its C{Host} header) and C{uri}.

    @param fallback: the host to use when C{host} is missing or malformed.
    @param port: the HTTPS port (omitted from the URL when 443).
    """
    match = _HOST.fullmatch(host or b"")
    name = match.group("host") if match else fallback.encode("ascii")
    suffix = b"" if port == HTTPS_PORT else b":%d" % port
    path = uri if uri.startswith(b"/") else b"/"
    return b"https://" + name.lower() + suffix + path


class RedirectToHTTPS(resource.Resource):
    """
    Answers every request with a C{308} to its HTTPS URL.

    @ivar port: returns the HTTPS port (known once the TLS port listens).
    """

    isLeaf = True

    def __init__(self, fallback: str, port: Callable[[], int]) -> None:
        super().__init__()
        self.fallback = fallback
        self.port = port

    def render(self, request: Request) -> bytes:
        """
        Redirect.
        """
        location = https_location(
            request.getHeader(b"host"), self.fallback, self.port(), request.uri
        )
        request.setResponseCode(308)
        request.setHeader(b"location", location)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"cache-control", b"no-store")
        return b"" if request.method == b"HEAD" else REDIRECT_BODY


class BannerlessRequest(server.Request):
    """
    A request whose response names no server software or version (Twisted
    sets C{Server: TwistedWeb/VERSION} on every response).
    """

    def setHeader(self, name: bytes | str, value: bytes | str) -> None:
        """
        Any header but C{Server}.
        """
        key = name.encode("ascii") if isinstance(name, str) else name
        if key.lower() != b"server":
            super().setHeader(name, value)


class QuietSite(server.Site):
    """
    A site without an access log, tracebacks in responses, or a version
    banner.
    """

    displayTracebacks = False
    noisy = False
    requestFactory = BannerlessRequest

    def log(self, request: Any) -> None:
        """
        No access log: nothing per request at info.
        """


def redirect_site(fallback: str, port: Callable[[], int], reactor: Any) -> QuietSite:
    """
    The HTTP port's site, its connection timeouts on C{reactor}.
    """
    return QuietSite(RedirectToHTTPS(fallback, port), reactor=reactor)
