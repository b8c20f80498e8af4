# -*- test-case-name: tests.http.test_headers -*-
"""
Header rewriting for the HTTP proxy, as pure functions over header lists
(C{[(name, value), ...]} of bytes, names in any case, order kept).

  - L{withoutHopByHop}: drops the hop-by-hop headers (RFC 9110 section
    7.6.1): the fixed list L{HOP_BY_HOP} and every header the C{Connection}
    header names (but never C{Host} or C{Content-Length}, which frame and
    route the message), and C{Content-Length} when C{Transfer-Encoding},
    which overrides it, is there; an upgrade keeps its C{Upgrade} header
    and a C{Connection: upgrade}.
  - L{requestHeaders}: what goes to the backend: the above, then the
    C{Host} rewrite, then the forwarding headers (L{FORWARDING}): the
    visitor's are dropped, ours put in their place, one header each.
  - L{responseHeaders}: what goes back to the visitor.

Framing is h11's business: C{Transfer-Encoding} never passes through, a
message whose body is chunked is marked chunked again for the next hop, and
it never goes on with a C{Content-Length} as well (RFC 9112 section 6.3:
the two together are how requests are smuggled).  Which requests are
refused before they get here is L{nfltr.http._checks}'.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Sequence

Headers = list[tuple[bytes, bytes]]

#: Visitor addresses whose IP address L{visitorIP} keeps, the most recent.
VISITORS_CACHED = 1024

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
#: Upgrade protocols never passed on: C{h2c} (deprecated by RFC 9113
#: section 3.1) would make the connection an HTTP/2 tunnel whose requests
#: reach the service unchecked, with whatever forwarding headers the
#: visitor writes in them.
NO_UPGRADE = frozenset({b"h2c"})
#: Headers that C{Connection} cannot remove: they route and frame the message.
PROTECTED = frozenset({b"host", b"content-length"})
#: What L{withoutHopByHop} drops from headers without a C{Connection} header.
_ALWAYS_DROPPED = HOP_BY_HOP - PROTECTED
#: The forwarding headers: a proxy that forwards (C{forwarded=True}) sets
#: them and never passes on the visitor's, which anyone can write.
FORWARDING = frozenset({
    b"x-forwarded-for",
    b"x-forwarded-proto",
    b"x-forwarded-host",
    b"forwarded",
    b"x-real-ip",
})

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


def upgradeProtocols(headers: Iterable[tuple[bytes, bytes]]) -> list[bytes]:
    """
    The protocols C{Upgrade} headers name (as written), but those in
    L{NO_UPGRADE}.
    """
    protocols = []
    for value in headerValues(headers, b"upgrade"):
        protocols += [p.strip() for p in value.split(b",") if p.strip()]
    return [p for p in protocols if p.lower() not in NO_UPGRADE]


def isUpgrade(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    """
    Whether these request headers ask for a protocol upgrade we pass on:
    C{Connection} names C{upgrade} and an C{Upgrade} header says to what
    (not only to L{NO_UPGRADE} protocols).
    """
    return b"upgrade" in commaValues(headers, b"connection") and bool(upgradeProtocols(headers))


def withoutHopByHop(headers: Sequence[tuple[bytes, bytes]], upgrade: bool = False) -> Headers:
    """
    C{headers} without the hop-by-hop ones (see the module).

    @param upgrade: keep C{Upgrade} (without L{NO_UPGRADE} protocols) and
        say C{Connection: upgrade} (an upgrade request, or the C{101} that
        accepts it).
    """
    present = {name.lower() for name, _ in headers}
    drop = _ALWAYS_DROPPED
    if b"connection" in present:
        drop = (HOP_BY_HOP | set(commaValues(headers, b"connection"))) - PROTECTED
    if b"transfer-encoding" in present and headerValues(headers, b"transfer-encoding"):
        drop = drop | {b"content-length"}
    kept = [(name, value) for name, value in headers if name.lower() not in drop]
    if upgrade:
        protocols = upgradeProtocols(headers)
        if protocols:
            kept.append((b"Upgrade", b", ".join(protocols)))
        kept.append((b"Connection", b"upgrade"))
    return kept


def setHeader(headers: Sequence[tuple[bytes, bytes]], name: bytes, value: bytes) -> Headers:
    """
    C{headers} with every header called C{name} replaced by one, at the end.
    """
    lower = name.lower()
    return [(k, v) for k, v in headers if k.lower() != lower] + [(name, value)]


@functools.lru_cache(maxsize=VISITORS_CACHED)
def visitorIP(visitor: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """
    The IP address in a visitor's address as text (C{"203.0.113.5:4711"},
    C{"[2001:db8::1]:443"}, or a bare address), or C{None} if there is none.
    Cached: each request of a visitor connection asks again, and parsing
    an address takes dozens of calls.
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
        visitor's is in C{X-Forwarded-Host} (ours when C{forwarded}, else
        the one that came, or one added if none came).
    @param forwarded: this proxy is the first hop: the visitor's
        forwarding headers (L{FORWARDING}, also spelt with C{_}) are
        dropped, and ours say its address (C{X-Forwarded-For},
        C{X-Real-IP}, when known), C{scheme} (C{X-Forwarded-Proto}), its
        C{Host} (C{X-Forwarded-Host}) and all three in one RFC 7239
        C{Forwarded} element.  Off, those headers are left as they came:
        the proxy before this one (the relay's, for an agent) set them.
    @param scheme: the scheme the visitor used.
    """
    # The passes for headers a request does not have are skipped (most have
    # neither Connection, Transfer-Encoding nor Content-Length).
    present = {name.lower() for name, _ in headers}
    out = withoutHopByHop(headers, upgrade=b"connection" in present and isUpgrade(headers))
    original = next(iter(headerValues(headers, b"host")), None)
    if b"transfer-encoding" in present and commaValues(headers, b"transfer-encoding"):
        out.append((b"Transfer-Encoding", b"chunked"))
    if host is not None:
        out = setHeader(out, b"Host", host)
    if b"content-length" in present:
        out = [(name, _canonicalLength(value) if name.lower() == b"content-length" else value)
               for name, value in out]
    if forwarded:
        # CGI and WSGI servers read X_Forwarded_For as X-Forwarded-For: both go.
        out = [(name, value) for name, value in out
               if name.lower().replace(b"_", b"-") not in FORWARDING]
        out += _forwarding(visitorIP(visitor), scheme, original)
    elif host is not None and original is not None and not headerValues(out, b"x-forwarded-host"):
        out.append((b"X-Forwarded-Host", original))
    return out


def _canonicalLength(value: bytes) -> bytes:
    """
    A C{Content-Length} (digits, as h11 checked) as its decimal value.
    """
    return str(int(value)).encode("ascii") if value.isdigit() else value


def _forwarding(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None, scheme: bytes, host: bytes | None
) -> Headers:
    """
    Our forwarding headers for a visitor at C{ip} (if known) who used
    C{scheme} and asked for C{host} (if it named one).
    """
    out: Headers = []
    if ip is not None:
        address = str(ip).encode("ascii")
        out += [(b"X-Forwarded-For", address), (b"X-Real-IP", address)]
    out.append((b"X-Forwarded-Proto", scheme))
    if host is not None:
        out.append((b"X-Forwarded-Host", host))
    if ip is not None:
        out.append((b"Forwarded", forwardedElement(ip, scheme, host)))
    return out


def responseHeaders(headers: Sequence[tuple[bytes, bytes]], switching: bool = False) -> Headers:
    """
    The headers of a backend's response as they go to the visitor.

    @param switching: the response is the C{101} of an upgrade: keep
        C{Upgrade} and C{Connection: upgrade}.
    """
    return withoutHopByHop(headers, upgrade=switching)
