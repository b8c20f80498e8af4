# -*- test-case-name: tests.relay.test_admin -*-
"""
The admin listener's web site: C{/healthz} answers C{200 ok} while the relay
process runs (liveness); C{/readyz} answers C{200 ready} once the relay
listens and until it starts to stop, C{503} otherwise (readiness: take it
out of a load balancer while it drains); C{/metrics} serves Prometheus
metrics (L{nfltr.relay.metrics}); C{/api} and C{/dashboard} the relay's API
and dashboard (L{nfltr.relay.api}).  Every other path is a plain 404; there
is no directory listing, no traceback in responses and no access log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.web import resource
from twisted.web.server import Request

from .redirect import QuietSite

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


class Readyz(resource.Resource):
    """
    C{GET /readyz}: C{200 ready} while C{ready()} is true, else C{503}.
    """

    isLeaf = True

    def __init__(self, ready: Callable[[], bool]) -> None:
        super().__init__()
        self.ready = ready

    def render_GET(self, request: Request) -> bytes:
        """
        Say whether the relay takes traffic.
        """
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"cache-control", b"no-store")
        if self.ready():
            return b"ready\n"
        request.setResponseCode(503)
        return b"not ready\n"

    render_HEAD = render_GET


class AdminSite(QuietSite):
    """
    A L{QuietSite}: no tracebacks in responses, no version banner, and no
    access log (health checks would flood it).
    """


def admin_site(
    ready: Callable[[], bool] | None = None, metrics: resource.Resource | None = None,
    reactor: Any = None, children: dict[bytes, resource.Resource] | None = None,
) -> AdminSite:
    """
    The admin site: C{/healthz}, C{/readyz} (if C{ready} is given),
    C{/metrics} (if C{metrics} is), C{children} (the API and the
    dashboard: L{nfltr.relay.api}), and 404 for anything else (C{/}
    included); its connection timeouts on C{reactor}.
    """
    root = resource.Resource()
    root.putChild(b"", resource.NoResource())
    root.putChild(b"healthz", Healthz())
    if ready is not None:
        root.putChild(b"readyz", Readyz(ready))
    if metrics is not None:
        root.putChild(b"metrics", metrics)
    for name, child in (children or {}).items():
        root.putChild(name, child)
    return AdminSite(root, reactor=reactor)
