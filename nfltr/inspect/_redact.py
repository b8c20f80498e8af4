# -*- test-case-name: tests.inspect.test_redact -*-
"""
What the inspector shows of a kept head, sans I/O, at read time: the ring
(L{nfltr.inspect._ring}) keeps each head as it came (one bytes object, or
the header list a parser gave), and its fields are read and redacted only
when the page, the API or a replay asks for them.  Everything shown passes
through L{shown}, the one place a header's value leaves a record.

Redaction: the value of a field whose name, stripped of spaces and tabs
and lowercased, is secret (C{Authorization}, C{Proxy-Authorization},
C{Cookie}, C{Set-Cookie} and the share's own required headers) is shown as
L{REDACTION}; an obs-fold continuation (RFC 9112 section 5.2) belongs to
the field before it, redacted with it; a line that does not read as a
field (no colon, a name that is not a token, a continuation with nothing
before it) is shown with no name and its value redacted.  The proxy's
parsers let no such line through; this reader does not rely on them.

Bounds: a head is kept up to L{HEAD_CAP} bytes, cut at a line end
(L{cut_head}); at most L{MAX_HEADERS} fields are shown per message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Headers whose values are never shown.
REDACTED = frozenset({b"authorization", b"proxy-authorization", b"cookie", b"set-cookie"})
REDACTION = b"[redacted]"
#: Headers shown per message.
MAX_HEADERS = 100
#: Bytes of each head kept (the proxy's own limits are 64 KiB by default,
#: and may be lifted): the lines past it are dropped.
HEAD_CAP = 64 * 1024

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9a-z]+")
_SPACE = b" \t"
_REDACTED_TEXT = REDACTION.decode("latin-1")


def secret_names(names: Iterable[bytes]) -> frozenset[bytes]:
    """
    L{REDACTED} and C{names}, as L{shown} compares them.
    """
    return REDACTED | {n.strip(_SPACE).lower() for n in names}


def cut_head(head: bytes, cap: int) -> bytes:
    """
    C{head} if it has at most C{cap} bytes, else its whole lines that fit.
    """
    if len(head) <= cap:
        return head
    return head[:head.rfind(b"\n", 0, cap) + 1]


def head_fields(head: bytes) -> list[tuple[bytes, bytes]]:
    """
    The fields of C{head} (its start line skipped), names lowercased and
    stripped, continuations joined to the field before them; a line that
    is not a field has the empty name.  Line ends CRLF or LF; the head
    ends at its first empty line.
    """
    fields: list[tuple[bytes, bytes]] = []
    for raw in head.split(b"\n")[1:]:
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if not line:
            break
        if line[:1] in (b" ", b"\t"):
            name, value = fields.pop() if fields else (b"", b"")
            fields.append((name, value + b" " + line.strip(_SPACE)))
            continue
        name, colon, value = line.partition(b":")
        name = name.strip(_SPACE).lower()
        fields.append((name, value.strip(_SPACE)) if colon else (b"", line))
    return fields


def shown(fields: Iterable[tuple[bytes, bytes]], secret: frozenset[bytes]
          ) -> list[tuple[str, str]]:
    """
    At most L{MAX_HEADERS} of C{fields} as text, names lowercased, the
    values of secret names and of lines that are no field redacted.
    """
    out = []
    for name, value in fields:
        lower = name.strip(_SPACE).lower()
        if lower in secret or _TOKEN.fullmatch(lower) is None:
            out.append((lower.decode("latin-1"), _REDACTED_TEXT))
        else:
            out.append((lower.decode("latin-1"), value.decode("latin-1")))
        if len(out) == MAX_HEADERS:
            break
    return out
