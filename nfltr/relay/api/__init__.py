# -*- test-case-name: tests.relay.api -*-
"""
The relay's API and dashboard, on its admin listener (loopback unless
C{--admin} says otherwise), next to C{/healthz}, C{/readyz} and
C{/metrics}; described for operators in C{docs/api.md} and
C{docs/openapi.json}.

  - L{nfltr.relay.api._view}: what is read of the running relay (agents,
    shares), and what is done to it (kick an agent, drain);
  - L{nfltr.relay.api._auth}: admin tokens, sessions, CSRF tokens, and the
    limit on failed attempts per source;
  - L{nfltr.relay.api._routes} and L{nfltr.relay.api._handlers}: the route
    table and what each route does; L{nfltr.relay.api._resource}: the
    resource at C{/api} that authenticates and dispatches;
  - L{nfltr.relay.api._events}: the server-sent events the dashboard lives
    on;
  - L{nfltr.relay.api._dashboard}: C{/dashboard}, a static page over the
    API (files in C{static/}), its login and logout.

L{api_resources} makes them for the admin site.
"""

from __future__ import annotations

from twisted.internet.interfaces import IReactorTime
from twisted.web import resource

from nfltr.relay.config import DEFAULT_API_LIMITS, ApiLimits
from nfltr.store import IStore

from ._dashboard import Dashboard
from ._events import EventStreams
from ._handlers import ROUTES
from ._resource import AdminApi, ApiResource
from ._routes import Route
from ._view import RelayView

__all__ = ["ROUTES", "AdminApi", "RelayView", "Route", "api_resources"]


def api_resources(
    view: RelayView, store: IStore, clock: IReactorTime, limits: ApiLimits = DEFAULT_API_LIMITS,
) -> tuple[AdminApi, dict[bytes, resource.Resource]]:
    """
    The API's state, and the admin site's children it serves: C{api} and
    C{dashboard}, within C{limits}.
    """
    api = AdminApi(view, store, clock, limits=limits)
    api.events = EventStreams(view, api.sessions, clock, limits.interval, limits.streams)
    return api, {b"api": ApiResource(api), b"dashboard": Dashboard(api)}
