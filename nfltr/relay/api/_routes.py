# -*- test-case-name: tests.relay.api.test_openapi -*-
"""
The API's route table: each L{Route} is a method, a path template
(C{/api/v1/agents/{name}}), whether it changes anything (then a read-only
token is refused, and a session must carry its CSRF token), a summary, and
the handler.  The dispatcher (L{nfltr.relay.api._resource}) matches
requests against it, and C{docs/openapi.json} is checked against it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from twisted.web.server import Request

    from nfltr.store import IStore

    from ._auth import Principal, Sessions
    from ._view import RelayView

#: The largest request body read (an SSH public key line fits).
MAX_BODY = 64 * 1024
API_PREFIX = "/api/v1"


class ApiError(Exception):
    """
    A refusal: its HTTP status and the message the JSON body carries.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Call:
    """
    One authenticated API call.

    @ivar params: the path template's parameters.
    @ivar store: the relay's store (L{IStore} and L{nfltr.store.IAdminTokens}).
    """

    request: Request
    params: dict[str, str]
    principal: Principal
    view: RelayView
    store: IStore
    sessions: Sessions

    def query(self, name: str) -> str | None:
        """
        The query argument C{name}, if given (the first, as text).
        """
        values = self.request.args.get(name.encode("ascii")) if self.request.args else None
        return values[0].decode("utf-8", "replace") if values else None

    def body(self) -> dict[str, Any]:
        """
        The request's JSON object body.

        @raise ApiError: 413 over L{MAX_BODY}, 400 not a JSON object.
        """
        content = self.request.content
        raw = b"" if content is None else content.read(MAX_BODY + 1)
        if len(raw) > MAX_BODY:
            raise ApiError(413, f"the request body is over {MAX_BODY} bytes")
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            raise ApiError(400, "the request body is not JSON") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the request body is not a JSON object")
        return data

    def text(self, data: dict[str, Any], name: str) -> str:
        """
        The text field C{name} of C{data}.

        @raise ApiError: 400, missing or not text.
        """
        value = data.get(name)
        if not isinstance(value, str):
            raise ApiError(400, f"the field {name!r} must be text")
        return value

    def optional(self, data: dict[str, Any], name: str) -> str | None:
        """
        The text field C{name} of C{data}, or L{None} if absent or null.

        @raise ApiError: 400, not text.
        """
        return None if data.get(name) is None else self.text(data, name)


Handler = Callable[[Call], Awaitable[tuple[int, Any]]]


@dataclass(frozen=True)
class Route:
    """
    One route: see the module.
    """

    method: str
    template: str
    change: bool
    summary: str
    handler: Handler
    parts: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.template.strip("/").split("/")))

    def match(self, segments: Sequence[str]) -> dict[str, str] | None:
        """
        The parameters of a path split in C{segments} (decoded), if it is
        this route's path.
        """
        if len(segments) != len(self.parts):
            return None
        params = {}
        for part, segment in zip(self.parts, segments, strict=True):
            if part.startswith("{") and part.endswith("}"):
                if not segment:
                    return None
                params[part[1:-1]] = segment
            elif part != segment:
                return None
        return params


def find(routes: Sequence[Route], method: str, segments: Sequence[str]
         ) -> tuple[Route | None, dict[str, str], list[str]]:
    """
    The route for C{method} on C{segments}, its parameters, and the methods
    the path allows (empty: no such path).
    """
    allowed = []
    for route in routes:
        params = route.match(segments)
        if params is None:
            continue
        allowed.append(route.method)
        if route.method == method or (method == "HEAD" and route.method == "GET"):
            return route, params, allowed
    return None, {}, allowed
