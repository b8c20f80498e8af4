# -*- test-case-name: tests.wire.test_constants -*-
"""
Numbers more than one role must agree on, each named once.
"""

#: How many extra data connections an agent may bind to its first link
#: (docs/link-protocol.md, "Data connections"): the agent dials at most this
#: many and the relay refuses more.
MAX_DATA_LINKS = 3

#: The largest plaintext of one TLS record, 2**14 bytes (RFC 8446 section
#: 5.1, RFC 5246 section 6.2.1): what the ClientHello reader accepts per
#: record and what the tuned TLS data path reads and writes at once.
TLS_RECORD_PAYLOAD = 1 << 14

#: Why a passthrough share takes no credentials: nobody on the path but the
#: service reads its requests (its TLS ends there).  The agent refuses such a
#: share at start and the relay at publication, with these words.
PASSTHROUGH_NO_CREDENTIALS = (
    "credentials need someone to read the requests: in passthrough only the service does "
    "(its TLS ends there)"
)


def canned_response(status: bytes, body: bytes) -> bytes:
    """
    A complete HTTP/1.1 response that closes the connection: C{status} (for
    example C{b"400 Bad Request"}) with C{body} as plain UTF-8 text.  For
    ports that answer a browser speaking the wrong protocol to them.
    """
    return (
        b"HTTP/1.1 " + status + b"\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: " + str(len(body)).encode("ascii") + b"\r\n"
        b"Connection: close\r\n"
        b"\r\n" + body
    )
