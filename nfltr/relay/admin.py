# -*- test-case-name: tests.relay.test_admin -*-
"""
The admin listener's web site: C{/healthz} answers C{200 ok} while the relay
runs.  Every other path is a plain 404; there is no directory listing, no
traceback in responses and no access log.
"""

from __future__ import annotations

from typing import Any

from twisted.web import resource, server
from twisted.web.server import Request

HEALTHZ_BODY = b"ok\n"


class Healthz(resource.Resource):
    """
    C{GET /healthz}: C{200}, C{ok}.  Paths below it are 404 (the default
    C{getChild}).
    """

    def render_GET(self, request: Request) -> bytes:
        """
        Say the relay is up.
        """
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"cache-control", b"no-store")
        return HEALTHZ_BODY

    render_HEAD = render_GET


class AdminSite(server.Site):
    """
    A L{server.Site} without tracebacks in responses and without an access
    log (health checks would flood it).
    """

    displayTracebacks = False
    noisy = False

    def log(self, request: Any) -> None:
        """
        No access log.
        """


def admin_site() -> AdminSite:
    """
    The admin site: C{/healthz}, and 404 for anything else (C{/} included).
    """
    root = resource.Resource()
    root.putChild(b"", resource.NoResource())
    root.putChild(b"healthz", Healthz())
    return AdminSite(root)
