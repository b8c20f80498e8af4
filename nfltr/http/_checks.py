# -*- test-case-name: tests.http.test_smuggling -*-
"""
What the proxy refuses in a visitor's request head before any of it goes
on, sans I/O: the rules RFC 9112 sets an intermediary, where h11 (which has
refused the rest by then) leaves them to us.

Framing: a request goes on only if every parser reads its length the same
way.

  - C{Transfer-Encoding} with C{Content-Length}: 400 and close (RFC 9112
    section 6.3, item 3, the answer it prefers to forwarding);
  - C{Transfer-Encoding} in an HTTP/1.0 request: 400 (section 6.1, "treat
    the message as if the framing is faulty");
  - a C{Transfer-Encoding} other than one C{chunked} (chunked not last, a
    coding alone, two headers), C{Content-Length}s that differ or a
    malformed one: h11 refuses them as it parses; L{parseErrorStatus}
    makes each a 400 (section 6.3, items 4 and 5), h11's 501 included.

What h11 reads leniently it writes canonically, so none of it reaches the
backend: a bare LF line end (section 2.2), an obs-fold (section 5.2: h11
replaces it with a space), repeated equal C{Content-Length}s (one goes on).

Target (section 3.2): origin-form; absolute-form, whose authority is the
request's host (section 3.2.2: the C{Host} header is then ignored) and which
goes on in origin-form with that C{Host}; C{*} for C{OPTIONS} only.
Anything else (authority-form outside C{CONNECT}, userinfo, a scheme other
than http or https, a malformed host) is 400.  A proxy given the host names
it serves answers a request for any other name 421 (RFC 9110 section
15.5.20), so one share's connection never carries requests for another.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from http import HTTPStatus

import h11

#: The host of an authority: a reg-name (RFC 3986 section 3.2.2) or an IP
#: literal, then an optional port.
_AUTHORITY = re.compile(
    rb"(?P<host>[A-Za-z0-9\-._~!$&'()*+,;=%]*|\[[0-9A-Fa-f:.]+\])(?::[0-9]*)?"
)
_ABSOLUTE = re.compile(rb"(?i:https?)://(?P<authority>[^/?#]*)(?P<rest>[/?#].*)?", re.DOTALL)


def parseErrorStatus(hint: int) -> HTTPStatus:
    """
    The status for a request h11 could not parse, from its hint: 431 for
    a head too large, 400 for everything else (h11's 501 means a
    C{Transfer-Encoding} it does not take: the body's length is unknown).
    """
    if hint == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE:
        return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
    return HTTPStatus.BAD_REQUEST


def absoluteForm(target: bytes) -> tuple[bytes, bytes] | None:
    """
    An absolute-form target's authority and its origin-form (C{/} when it
    has no path), or L{None} for any other form.
    """
    match = _ABSOLUTE.fullmatch(target)
    if match is None:
        return None
    rest = match.group("rest") or b"/"
    return match.group("authority"), rest if rest.startswith(b"/") else b"/" + rest


def requestAuthority(request: h11.Request) -> bytes | None:
    """
    The authority a request names: an absolute-form target's, else its
    C{Host}'s; L{None} if neither.
    """
    return authorityOf(request.target, request.headers)


def authorityOf(target: bytes, headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """
    The authority a request with C{target} and C{headers} names (see
    L{requestAuthority}).
    """
    absolute = absoluteForm(target)
    if absolute is not None:
        return absolute[0]
    return next((value for name, value in headers if name.lower() == b"host"), None)


def hostName(authority: bytes | None) -> str | None:
    """
    The host name in an authority, as compared: lowercase, without the
    port or a final dot; L{None} if there is none or it is malformed.
    """
    match = _AUTHORITY.fullmatch(authority or b"")
    if match is None or not match.group("host"):
        return None
    return match.group("host").decode("ascii").lower().removesuffix(".")


def requestHost(request: h11.Request) -> str | None:
    """
    The host name a request names (see L{requestAuthority} and
    L{hostName}), as the proxy compares it with the names it serves.
    """
    return hostName(requestAuthority(request))


def requestRefusal(request: h11.Request, hosts: frozenset[str] | None) -> HTTPStatus | None:
    """
    Why C{request} must not go on (a status to answer and close with), or
    L{None}; see the module.

    @param hosts: the host names (as L{hostName} gives them) the request
        may name; L{None}: any.
    """
    headers = {name for name, _ in request.headers}
    if b"transfer-encoding" in headers and (
        b"content-length" in headers or request.http_version < b"1.1"
    ):
        return HTTPStatus.BAD_REQUEST
    return targetRefusal(request.method, request.target, requestAuthority(request), hosts)


def targetRefusal(
    method: bytes, target: bytes, authority: bytes | None, hosts: frozenset[str] | None,
) -> HTTPStatus | None:
    """
    Why a request for C{target} (naming C{authority}) must not go on, or
    L{None}: the target and host rules of the module.
    """
    if target == b"*":
        if method != b"OPTIONS":
            return HTTPStatus.BAD_REQUEST
    elif not target.startswith(b"/") and absoluteForm(target) is None:
        return HTTPStatus.BAD_REQUEST
    if authority is not None and _AUTHORITY.fullmatch(authority) is None:
        return HTTPStatus.BAD_REQUEST
    if hosts is not None and hostName(authority) not in hosts:
        return HTTPStatus.MISDIRECTED_REQUEST
    return None
