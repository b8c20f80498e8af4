# -*- test-case-name: tests.http.test_heads -*-
"""
Message heads for the stream path (L{nfltr.http._stream}), sans I/O: a
strict parser of request heads, a tolerant one of response heads, and the
framing of each message's body (RFC 9112 section 6).

Requests come from anyone, so their heads are read strictly and anything in
doubt is refused (L{HeadError} with the status to answer) rather than
repaired: bare LF or CR line ends (section 2.2), obs-fold (section 5.2),
whitespace before a colon (section 5.1), a name that is not a token, control
characters in a value, a version other than HTTP/1.0 and HTTP/1.1, a
missing or repeated C{Host} in HTTP/1.1 (RFC 9110 section 7.2), more than
one C{Content-Length} (even equal: section 6.3 item 5 lets a recipient
refuse them, and the stream path forwards heads as they came), a
C{Content-Length} that is not digits, C{Transfer-Encoding} other than one
C{chunked} (section 6.3 item 4), both together (item 3), or
C{Transfer-Encoding} in HTTP/1.0.  What passes is framed one way only.

Responses come from the user's own service: a head the parser cannot read
is a 502, but bare LF line ends and obs-fold are read (section 2.2 lets a
recipient) and the head is then written out again canonically
(L{ResponseHead.clean} is false), as is one with both
C{Transfer-Encoding} and C{Content-Length} (the length dropped: section
6.3 item 3), so what the visitor reads is framed the way the proxy read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus

Headers = list[tuple[bytes, bytes]]

#: A request head: the method, a target of visible characters, the version.
_REQUEST_LINE = re.compile(
    rb"(?P<method>[!#$%&'*+\-.^_`|~0-9A-Za-z]+) (?P<target>[\x21-\x7e]+) "
    rb"HTTP/(?P<version>1\.[01])"
)
#: A field line: a token, a colon, optional whitespace, then visible
#: characters, obs-text, spaces and tabs (no control characters).
_FIELD = re.compile(
    rb"(?P<name>[!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*(?P<value>[\x20-\x7e\x80-\xff\t]*)"
)
_STATUS_LINE = re.compile(
    rb"HTTP/(?P<version>1\.[01]) (?P<status>[0-9]{3})(?: (?P<reason>[^\r\n]*))?"
)
_DIGITS = re.compile(rb"[0-9]{1,18}")
#: The end of a head, and the line end: CRLF only, in requests.
HEAD_END = b"\r\n\r\n"
CRLF = b"\r\n"


class HeadError(Exception):
    """
    A head that must not go on.

    @ivar status: the status to answer the visitor with.
    @ivar why: what was wrong, for a debug log.
    """

    def __init__(self, status: HTTPStatus, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why


#: Statuses whose responses carry no body (RFC 9112 section 6.3, item 1).
BODILESS = frozenset({HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED})

#: No body follows the head.
NONE = -1
#: A chunked body follows.
CHUNKED = -2
#: The body runs until the connection closes (responses only).
UNTIL_CLOSE = -3


@dataclass
class RequestHead:
    """
    A request head as it came.

    @ivar length: the body's framing: a byte count (0 or more), or
        L{CHUNKED}.
    @ivar raw: the head's bytes as they came (the empty line included),
        when it was read from bytes.
    """

    method: bytes
    target: bytes
    version: bytes
    headers: Headers
    length: int
    raw: bytes = b""

    @property
    def keepAlive(self) -> bool:
        """
        Whether the visitor keeps the connection after this request: HTTP/1.1
        unless it says C{close}, HTTP/1.0 only if it says C{keep-alive}.
        """
        tokens = connectionTokens(self.headers)
        if self.version == b"1.1":
            return b"close" not in tokens
        return b"keep-alive" in tokens

    def serialize(self, headers: Headers, target: bytes | None = None) -> bytes:
        """
        The head with C{headers} (and C{target}, if given) in place of its own.
        """
        return _serialize(
            b"%s %s HTTP/%s" % (self.method, target or self.target, self.version), headers
        )


@dataclass
class ResponseHead:
    """
    A response head.

    @ivar raw: the head's bytes as they came (the blank line included).
    @ivar length: the body's framing: a byte count, L{NONE}, L{CHUNKED} or
        L{UNTIL_CLOSE}; set by L{responseFraming}.
    @ivar clean: the head may go on as it came; otherwise L{serialize}.
    @ivar reusable: the connection may carry another request after this
        response (not after one framed in doubt or announcing C{close}).
    @ivar closes: the response tells the visitor the connection ends
        after it (C{Connection: close}, or HTTP/1.0 without keep-alive).
    """

    version: bytes
    status: int
    reason: bytes
    headers: Headers
    raw: bytes
    clean: bool
    length: int = NONE
    reusable: bool = True
    closes: bool = False

    def serialize(self) -> bytes:
        """
        The head written out again, canonically.
        """
        return _serialize(b"HTTP/%s %d %s" % (self.version, self.status, self.reason),
                          self.headers)


def _serialize(line: bytes, headers: Headers) -> bytes:
    return b"".join([line, CRLF] + [b"%s: %s\r\n" % field for field in headers] + [CRLF])


def connectionTokens(headers: Headers) -> set[bytes]:
    """
    The lowercased options of every C{Connection} header.
    """
    tokens: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            tokens.update(t.strip().lower() for t in value.split(b","))
    return tokens


def _fields(lines: list[bytes], bad: HTTPStatus) -> Headers:
    headers = []
    for line in lines:
        match = _FIELD.fullmatch(line)
        if match is None:
            raise HeadError(bad, "malformed field line")
        headers.append((match.group("name"), match.group("value").rstrip(b" \t")))
    return headers


def parseRequestHead(head: bytes) -> RequestHead:
    """
    Read a request head: C{head} ends with its blank line, leading blank
    lines already skipped.

    @raise HeadError: see the module.
    """
    if b"\n" in head.replace(CRLF, b"") or b"\r" in head.replace(CRLF, b""):
        raise HeadError(HTTPStatus.BAD_REQUEST, "bare CR or LF in the head")
    lines = head[: -len(HEAD_END)].split(CRLF)
    match = _REQUEST_LINE.fullmatch(lines[0])
    if match is None:
        raise HeadError(HTTPStatus.BAD_REQUEST, "malformed request line")
    headers = _fields(lines[1:], HTTPStatus.BAD_REQUEST)
    version = match.group("version")
    length = _requestLength(headers, version)
    return RequestHead(match.group("method"), match.group("target"), version, headers, length,
                       head)


def _requestLength(headers: Headers, version: bytes) -> int:
    lengths, codings, hosts = [], [], 0
    for name, value in headers:
        lower = name.lower()
        if lower == b"content-length":
            lengths.append(value)
        elif lower == b"transfer-encoding":
            codings.append(value)
        elif lower == b"host":
            hosts += 1
    if hosts > 1 or (version == b"1.1" and hosts == 0):
        raise HeadError(HTTPStatus.BAD_REQUEST, "not exactly one Host")
    if codings:
        if lengths or version != b"1.1":
            raise HeadError(HTTPStatus.BAD_REQUEST,
                            "Transfer-Encoding with Content-Length or in HTTP/1.0")
        if len(codings) != 1 or codings[0].lower() != b"chunked":
            raise HeadError(HTTPStatus.BAD_REQUEST, "a Transfer-Encoding other than chunked")
        return CHUNKED
    if not lengths:
        return 0
    if len(lengths) > 1 or _DIGITS.fullmatch(lengths[0]) is None:
        raise HeadError(HTTPStatus.BAD_REQUEST, "Content-Length repeated or malformed")
    return int(lengths[0])


def parseResponseHead(head: bytes) -> ResponseHead:
    """
    Read a response head: C{head} ends with its blank line (CRLF or bare
    LF ones).

    @raise HeadError: with C{502}, a head that cannot be read.
    """
    text = head.replace(CRLF, b"\n")
    clean = text.count(b"\n") == head.count(CRLF) and b"\r" not in text
    if not clean and b"\r" in text:
        raise HeadError(HTTPStatus.BAD_GATEWAY, "bare CR in the response head")
    lines = text[:-2].split(b"\n")
    match = _STATUS_LINE.fullmatch(lines[0])
    if match is None:
        raise HeadError(HTTPStatus.BAD_GATEWAY, "malformed status line")
    folded: list[bytes] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t") and folded:
            folded[-1] += b" " + line.strip(b" \t")
            clean = False
        else:
            folded.append(line)
    headers = _fields(folded, HTTPStatus.BAD_GATEWAY)
    return ResponseHead(match.group("version"), int(match.group("status")),
                        match.group("reason") or b"", headers, head, clean)


def responseFraming(response: ResponseHead, method: bytes) -> None:
    """
    Set C{response}'s framing (RFC 9112 section 6.3) for a request made
    with C{method}, and whether its connection may be reused; drop a
    C{Content-Length} that C{Transfer-Encoding} overrides.

    @raise HeadError: with C{502}, lengths that differ or are malformed.
    """
    headers = response.headers
    lengths = [v for n, v in headers if n.lower() == b"content-length"]
    codings = [v.strip().lower() for n, v in headers if n.lower() == b"transfer-encoding"]
    tokens = connectionTokens(headers)
    response.closes = b"close" in tokens or (
        response.version != b"1.1" and b"keep-alive" not in tokens)
    response.reusable = not response.closes
    status = response.status
    if method == b"HEAD" or status < HTTPStatus.OK or status in BODILESS:
        response.length = NONE
        if codings or any(v.strip() not in (b"0", b"") for value in lengths
                          for v in value.split(b",")):
            # A body announced where none may come: a server that sends it
            # anyway would answer the next request with it.
            response.reusable = False
        return
    if codings:
        if lengths:
            response.headers = [(n, v) for n, v in headers if n.lower() != b"content-length"]
            response.clean = False
            response.reusable = False
        last = b",".join(codings).split(b",")[-1].strip()
        if last == b"chunked":
            response.length = CHUNKED
        else:
            response.length, response.reusable = UNTIL_CLOSE, False
        return
    if not lengths:
        response.length, response.reusable = UNTIL_CLOSE, False
        return
    values = {v.strip() for value in lengths for v in value.split(b",")}
    if len(values) != 1 or _DIGITS.fullmatch(next(iter(values))) is None:
        raise HeadError(HTTPStatus.BAD_GATEWAY, "Content-Length in doubt")
    response.length = int(next(iter(values)))


def forwardedHead(response: ResponseHead, raw: bytes, closes: bool) -> bytes:
    """
    A final response head as it goes to the visitor: as it came when that
    says what the visitor's connection does next, else written again
    (RFC 9110 section 7.6.1: C{Connection} and C{Keep-Alive} are for one
    hop; section 6.2: an intermediary sends its own version) saying it:
    C{close} when the visitor's connection ends after it (the visitor
    asked, the body runs to the close, or pipelined requests were lost
    with the service connection), nothing otherwise, so a visitor keeps
    its connection when the service closes its own.
    """
    if response.clean and response.closes == closes:
        return raw
    headers = [(n, v) for n, v in response.headers if n.lower() not in _CONNECTION_HEADERS]
    if closes:
        headers.append((b"Connection", b"close"))
    return _rewritten(response, headers)


def _rewritten(response: ResponseHead, headers: list[tuple[bytes, bytes]]) -> bytes:
    lines = [b"HTTP/1.1 %d %s\r\n" % (response.status, response.reason)]
    lines += [b"%s: %s\r\n" % field for field in headers]
    return b"".join([*lines, b"\r\n"])


#: The hop-by-hop headers a rewritten response head drops.
_CONNECTION_HEADERS = frozenset({b"connection", b"keep-alive"})
