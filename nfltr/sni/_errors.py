# -*- test-case-name: tests.sni.test_parser -*-
"""
The ClientHello parser's one error.

L{ClientHelloError} is all the parser ever raises: its C{reason} is one of
the closed set L{Reason}, short enough to be a metric label or a log field,
and its C{detail} says what was wrong in words, safe to log (it never holds
more than a few bytes of the peer's input).
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """
    Why a connection's first bytes are not a ClientHello the router can use.
    Members compare equal to their string values (C{"not_tls"}, ...).
    """

    #: The first bytes are not a TLS handshake record header (plain HTTP, the
    #: link magic, an SSLv2-style hello, anything else).
    NOT_TLS = "not_tls"
    #: A record header declares more than L{MAX_RECORD_PAYLOAD} bytes.
    RECORD_TOO_LARGE = "record_too_large"
    #: A later record of a fragmented hello is not a non-empty handshake
    #: record, or the first record is empty.
    BAD_RECORD = "bad_record"
    #: The hello is spread over more than L{MAX_HELLO_RECORDS} records.
    TOO_FRAGMENTED = "too_fragmented"
    #: The first handshake message is not a ClientHello.
    NOT_CLIENT_HELLO = "not_client_hello"
    #: The ClientHello declares more than L{MAX_HELLO_SIZE} bytes.
    HELLO_TOO_LARGE = "hello_too_large"
    #: The stream ended before the hello was complete.
    TRUNCATED = "truncated"
    #: The ClientHello's fixed fields or its extension block are malformed.
    BAD_HELLO = "bad_hello"
    #: An extension is malformed or repeated.
    BAD_EXTENSION = "bad_extension"
    #: The server_name extension holds a name that is not a DNS host name.
    BAD_SERVER_NAME = "bad_server_name"


class ClientHelloError(Exception):
    """
    The connection's first bytes are not a usable TLS ClientHello.  Once
    raised, the parser that raised it raises it again on any further input.

    @ivar reason: the L{Reason}, a short code.
    @ivar detail: a human-readable explanation, safe to log.
    """

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
