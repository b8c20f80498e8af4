# -*- test-case-name: tests.http.test_stream -*-
"""
A share's rules for each request on the stream path
(L{nfltr.http._stream}), sans I/O: whether it may go on (its target, the
host it names, the share's gate: L{RequestRules.refusal}) and the head it
goes on with (L{RequestRules.forwarded}: the target in origin form, C{Host}
and the forwarding headers rewritten as L{nfltr.http._headers} says).
"""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus

from ._checks import absoluteForm, authorityOf, targetRefusal
from ._exchange import Gate, Refusal
from ._headers import requestHeaders, setHeader
from ._heads import RequestHead


class RequestRules:
    """
    What a proxy checks and rewrites in each request of one visitor
    connection (the settings of L{nfltr.http.HTTPProxyFactory}).
    """

    def __init__(
        self,
        *,
        visitor: str | None = None,
        host: bytes | None = None,
        forwarded: bool = True,
        scheme: bytes = b"https",
        gate: Gate | None = None,
        hosts: Sequence[str] | None = None,
    ) -> None:
        self._visitor, self._host, self._forwarded, self._scheme = visitor, host, forwarded, scheme
        self._gate = gate
        self._hosts = None if hosts is None else frozenset(
            h.lower().removesuffix(".") for h in hosts)

    def refusal(self, head: RequestHead) -> tuple[int, tuple[tuple[bytes, bytes], ...]] | None:
        """
        The status (and extra headers) to answer C{head} with instead of
        forwarding it, or L{None}: C{CONNECT} is not served (405), the
        target and host rules (L{nfltr.http._checks}: 400, 421), then the
        gate.
        """
        if head.method == b"CONNECT":
            return HTTPStatus.METHOD_NOT_ALLOWED, ()
        authority = authorityOf(head.target, head.headers)
        status = targetRefusal(head.method, head.target, authority, self._hosts)
        if status is not None:
            return status, ()
        if self._gate is not None:
            refused: Refusal | None = self._gate(head.headers, self._visitor)
            if refused is not None:
                return refused.status, refused.headers
        return None

    def forwarded(self, head: RequestHead) -> bytes:
        """
        C{head} as it goes to the service.
        """
        headers, target = self.headersFor(head)
        return head.serialize(headers, target)

    def headersFor(self, head: RequestHead) -> tuple[list[tuple[bytes, bytes]], bytes]:
        """
        The headers and target (origin-form) C{head} goes to the service with.
        """
        headers, target = head.headers, head.target
        absolute = absoluteForm(target)
        if absolute is not None:
            authority, target = absolute
            headers = setHeader(headers, b"Host", authority)
        headers = requestHeaders(headers, visitor=self._visitor, host=self._host,
                                 forwarded=self._forwarded, scheme=self._scheme)
        if head.version == b"1.0":
            # This hop keeps its connection if the service will, whatever
            # the visitor does with its own.
            headers.append((b"Connection", b"keep-alive"))
        return headers, target
