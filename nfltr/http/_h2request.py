# -*- test-case-name: tests.http.test_h2 -*-
"""
The HTTP/1.1 request head of one HTTP/2 stream (L{nfltr.http._h2}), sans
I/O: L{streamRequest} makes it from the stream's request headers, which h2
validated (lowercase names; no CR, LF or NUL; the pseudo-headers right),
or says the stream cannot be one HTTP/1.1 request.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ._headers import commaValues
from ._heads import CHUNKED, RequestHead

#: A method (RFC 9110 section 5.6.2: a token).
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: What a request target may not hold (RFC 9112 section 3).
_SPACE_OR_CONTROL = re.compile(rb"[\x00-\x20\x7f]")


def _split(given: Sequence[tuple[bytes, bytes]]) -> tuple[
        dict[bytes, bytes], list[tuple[bytes, bytes]], set[bytes]]:
    """
    A request's pseudo-headers; its other headers as HTTP/1.1 takes them
    (the cookie headers joined into one again, RFC 9113 section 8.2.3, and
    C{Host} the C{:authority} if there is one); which of L{_NOTED} it has.
    In one pass, without a call per header: h2 let only lowercase names
    through.
    """
    pseudo: dict[bytes, bytes] = {}
    headers: list[tuple[bytes, bytes]] = []
    seen: set[bytes] = set()
    cookies = 0
    for pair in given:
        name = pair[0]
        if name[:1] == b":":
            pseudo[name] = pair[1]
            continue
        if name in _NOTED:
            seen.add(name)
            cookies += name == b"cookie"
        headers.append(pair)
    if cookies > 1:
        joined = b"; ".join([v for n, v in headers if n == b"cookie"])
        headers = [(n, v) for n, v in headers if n != b"cookie"]
        headers.append((b"cookie", joined))
    authority = pseudo.get(b":authority")
    if authority is not None:
        if b"host" in seen:
            headers = [(n, v) for n, v in headers if n != b"host"]
        headers.insert(0, (b"host", authority))
    return pseudo, headers, seen


#: The request headers L{_split} says a request has.
_NOTED = frozenset({b"content-length", b"te", b"host", b"cookie"})


def streamRequest(given: Sequence[tuple[bytes, bytes]],
                  ended: bool) -> tuple[RequestHead | None, bool]:
    """
    The HTTP/1.1 request head of a stream whose request headers are
    C{given} (C{ended}: no body follows them; one without a length goes
    chunked), and whether the visitor takes trailers (C{te: trailers}).

    @return: no head (L{None}) for a method that is not a token, a target
        with a space or a control (neither would make one HTTP/1.1
        request line), or lengths that two parsers could read apart: the
        stream is answered C{400}.
    """
    pseudo, headers, seen = _split(given)
    method, target = pseudo.get(b":method", b"GET"), pseudo.get(b":path", b"/")
    lengths = commaValues(headers, b"content-length") if b"content-length" in seen else []
    if (_TOKEN.fullmatch(method) is None or _SPACE_OR_CONTROL.search(target)
            or len(set(lengths)) > 1 or not all(v.isdigit() for v in lengths)):
        return None, False
    chunked = not ended and not lengths
    if chunked:
        headers.append((b"transfer-encoding", b"chunked"))
    length = CHUNKED if chunked else (int(lengths[0]) if lengths else 0)
    trailers = b"te" in seen and b"trailers" in commaValues(given, b"te")
    return RequestHead(method, target, b"1.1", headers, length), trailers
