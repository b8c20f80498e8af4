# -*- test-case-name: tests.http.test_headers -*-
"""
Header rewriting for the HTTP proxy, as pure functions over header lists
(C{[(name, value), ...]} of bytes, names in any case, order kept).

  - L{withoutHopByHop}: drops the hop-by-hop headers (RFC 9110 section
    7.6.1): the fixed list L{HOP_BY_HOP} and every header the C{Connection}
    header names (but never C{Host} or C{Content-Length}, which frame and
    route the message); an upgrade keeps its C{Upgrade} header and a
    C{Connection: upgrade}.
  - L{requestHeaders}: what goes to the backend: the above, then the
    C{Host} rewrite, then the forwarding headers (C{X-Forwarded-For},
    C{X-Forwarded-Proto}, C{X-Forwarded-Host} and RFC 7239 C{Forwarded}).
  - L{responseHeaders}: what goes back to the visitor.

Framing is h11's business: C{Transfer-Encoding} never passes through, and a
request whose body is chunked is marked chunked again for the backend.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

Headers = list[tuple[bytes, bytes]]

#: Headers that concern one connection only (RFC 9110 section 7.6.1, plus
#: the legacy C{Keep-Alive} and C{Proxy-Connection}, and the proxy
#: credentials, which are for this hop and not the backend).
HOP_BY_HOP = frozenset({
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"proxy-authorization",
    b"proxy-authenticate",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
})
#: Headers that C{Connection} cannot remove: they route and frame the message.
PROTECTED = frozenset({b"host", b"content-length"})

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def commaValues(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    """
    The comma-separated elements of every header called C{name}, lowercased
    and stripped, empty ones left out.
    """
    name = name.lower()
    values: list[bytes] = []
    for key, value in headers:
        if key.lower() == name:
            values.extend(v.strip().lower() for v in value.split(b","))
    return [v for v in values if v]


def headerValues(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    """
    The values of every header called C{name}, in order.
    """
    name = name.lower()
    return [value for key, value in headers if key.lower() == name]


def isUpgrade(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    """
    Whether these request headers ask for a protocol upgrade: C{Connection}
    names C{upgrade} and an C{Upgrade} header says to what.
    """
    return b"upgrade" in commaValues(headers, b"connection") and bool(
        commaValues(headers, b"upgrade")
    )


def withoutHopByHop(headers: Sequence[tuple[bytes, bytes]], upgrade: bool = False) -> Headers:
    """
    C{headers} without the hop-by-hop ones (see the module).

    @param upgrade: keep C{Upgrade} and say C{Connection: upgrade} (an
        upgrade request, or the C{101} that accepts it).
    """
    drop = (HOP_BY_HOP | set(commaValues(headers, b"connection"))) - PROTECTED
    if upgrade:
        drop = drop - {b"upgrade"}
    kept = [(name, value) for name, value in headers if name.lower() not in drop]
    if upgrade:
        kept.append((b"Connection", b"upgrade"))
    return kept


def setHeader(headers: Sequence[tuple[bytes, bytes]], name: bytes, value: bytes) -> Headers:
    """
    C{headers} with every header called C{name} replaced by one, at the end.
    """
    lower = name.lower()
    return [(k, v) for k, v in headers if k.lower() != lower] + [(name, value)]


def appendList(headers: Sequence[tuple[bytes, bytes]], name: bytes, element: bytes) -> Headers:
    """
    C{headers} with C{element} added to the list header C{name}: the
    existing values, joined by commas, then C{element}, as one header.
    """
    existing = [v.strip() for v in headerValues(headers, name) if v.strip()]
    return setHeader(headers, name, b", ".join([*existing, element]))


def visitorIP(visitor: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """
    The IP address in a visitor's address as text (C{"203.0.113.5:4711"},
    C{"[2001:db8::1]:443"}, or a bare address), or C{None} if there is none.
    """
    if not visitor:
        return None
    text = visitor.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def quoteIfNeeded(value: bytes) -> bytes:
    """
    C{value} as an RFC 7239 parameter value: a token as is, anything else
    as a quoted-string.
    """
    if _TOKEN.fullmatch(value):
        return value
    return b'"' + value.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def forwardedElement(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address, scheme: bytes, host: bytes | None
) -> bytes:
    """
    One RFC 7239 C{Forwarded} element: C{for} (an IPv6 address bracketed
    and quoted, section 6), C{proto}, and C{host} when known.
    """
    node = str(ip).encode("ascii")
    if isinstance(ip, ipaddress.IPv6Address):
        node = b"[" + node + b"]"
    params = [b"for=" + quoteIfNeeded(node), b"proto=" + quoteIfNeeded(scheme)]
    if host is not None:
        params.append(b"host=" + quoteIfNeeded(host))
    return b";".join(params)


def requestHeaders(
    headers: Sequence[tuple[bytes, bytes]],
    *,
    visitor: str | None = None,
    host: bytes | None = None,
    forwarded: bool = True,
    scheme: bytes = b"https",
) -> Headers:
    """
    The headers of a visitor's request as they go to the backend.

    @param visitor: the visitor's address as text, if known.
    @param host: a C{Host} for the backend instead of the visitor's; the
        visitor's then goes in C{X-Forwarded-Host} (when C{forwarded}, or
        when there is no C{X-Forwarded-Host} yet).
    @param forwarded: add the forwarding headers for a known visitor:
        its address appended to C{X-Forwarded-For} and in a new C{Forwarded}
        element, C{X-Forwarded-Proto} set to C{scheme}.  Off, those headers
        are left as they came (an upstream proxy that is trusted set them).
    @param scheme: the scheme the visitor used.
    """
    out = withoutHopByHop(headers, upgrade=isUpgrade(headers))
    original = next(iter(headerValues(headers, b"host")), None)
    if commaValues(headers, b"transfer-encoding"):
        out.append((b"Transfer-Encoding", b"chunked"))
    if host is not None:
        out = setHeader(out, b"Host", host)
        if original is not None and (forwarded or not headerValues(out, b"x-forwarded-host")):
            out = setHeader(out, b"X-Forwarded-Host", original)
    ip = visitorIP(visitor)
    if forwarded and ip is not None:
        out = appendList(out, b"X-Forwarded-For", str(ip).encode("ascii"))
        out = setHeader(out, b"X-Forwarded-Proto", scheme)
        out = appendList(out, b"Forwarded", forwardedElement(ip, scheme, original))
    return out


def responseHeaders(headers: Sequence[tuple[bytes, bytes]], switching: bool = False) -> Headers:
    """
    The headers of a backend's response as they go to the visitor.

    @param switching: the response is the C{101} of an upgrade: keep
        C{Upgrade} and C{Connection: upgrade}.
    """
    return withoutHopByHop(headers, upgrade=switching)
