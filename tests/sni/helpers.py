"""
Shared helpers for the ClientHello parser's tests.

A small builder writes ClientHellos field by field (L{hello_body}, L{handshake}, L{records}), so
each test states the one thing it breaks; L{feed} runs a parser over chunks; L{live_hello} asks
this machine's Python C{ssl} for a fresh hello through memory BIOs (no socket).
"""

from __future__ import annotations

import contextlib
import random
import ssl
import struct
from collections.abc import Iterable, Sequence

from nfltr.sni import ClientHello, ClientHelloParser, NeedData

U16 = struct.Struct("!H")

EXT_SERVER_NAME = 0
EXT_ALPN = 16
EXT_SUPPORTED_VERSIONS = 43
EXT_KEY_SHARE = 51
EXT_ECH = 0xFE0D

# What follows a hello in the "trailing data" mode: the start of the next TLS record (a
# ChangeCipherSpec) and some application bytes, none of which the parser may touch.
TRAILING = b"\x14\x03\x03\x00\x01\x01" + b"GET / HTTP/1.1\r\n"


def u16(n: int) -> bytes:
    return U16.pack(n)


def extension(kind: int, data: bytes) -> bytes:
    """
    A whole extension: type, length, data.
    """
    return u16(kind) + u16(len(data)) + data


def sni_data(*names: bytes, name_type: int = 0) -> bytes:
    """
    A server_name extension's data listing C{names}, all of C{name_type}.
    """
    entries = b"".join(bytes([name_type]) + u16(len(n)) + n for n in names)
    return u16(len(entries)) + entries


def alpn_data(*protocols: bytes) -> bytes:
    """
    An ALPN extension's data listing C{protocols}.
    """
    names = b"".join(bytes([len(p)]) + p for p in protocols)
    return u16(len(names)) + names


def versions_data(*versions: int) -> bytes:
    """
    A ClientHello's supported_versions data.
    """
    return bytes([2 * len(versions)]) + b"".join(u16(v) for v in versions)


def hello_body(
    extensions: Sequence[bytes] | None = (),
    legacy_version: int = 0x0303,
    session_id: bytes = bytes(32),
    suites: bytes = b"\x13\x01\x13\x02",
    compression: bytes = b"\x00",
) -> bytes:
    """
    A ClientHello body.  C{extensions=None} leaves the extension block out altogether (a TLS
    1.2 hello may); otherwise each item is a whole extension (see L{extension}).
    """
    body = (
        u16(legacy_version) + bytes(range(32))
        + bytes([len(session_id)]) + session_id
        + u16(len(suites)) + suites
        + bytes([len(compression)]) + compression
    )
    if extensions is not None:
        block = b"".join(extensions)
        body += u16(len(block)) + block
    return body


def handshake(body: bytes, kind: int = 1) -> bytes:
    """
    A handshake message: type, 24-bit length, body.
    """
    return bytes([kind]) + len(body).to_bytes(3) + body


def records(
    message: bytes, sizes: Iterable[int] = (), ctype: int = 22, version: int = 0x0301
) -> bytes:
    """
    C{message} in TLS records of the payload sizes C{sizes} (the rest in one last record).
    """
    out = bytearray()
    pos = 0
    for size in [*sizes, len(message)]:
        chunk = message[pos : pos + size]
        if not chunk:
            break
        out += bytes([ctype]) + u16(version) + u16(len(chunk)) + chunk
        pos += len(chunk)
    return bytes(out)


def client_hello(
    server_name: bytes | None = b"demo.localhost",
    alpn: Sequence[bytes] = (b"h2", b"http/1.1"),
    versions: Sequence[int] = (0x0304, 0x0303),
    more: Sequence[bytes] = (),
    sizes: Iterable[int] = (),
) -> bytes:
    """
    A plausible TLS 1.3 hello in records, with the named extensions and C{more}.
    """
    exts = []
    if server_name is not None:
        exts.append(extension(EXT_SERVER_NAME, sni_data(server_name)))
    if alpn:
        exts.append(extension(EXT_ALPN, alpn_data(*alpn)))
    if versions:
        exts.append(extension(EXT_SUPPORTED_VERSIONS, versions_data(*versions)))
    exts.append(extension(EXT_KEY_SHARE, u16(36) + u16(29) + u16(32) + bytes(32)))
    return records(handshake(hello_body([*exts, *more])), sizes)


def feed(parser: ClientHelloParser, chunks: Iterable[bytes]) -> list[ClientHello | NeedData]:
    """
    Feed C{chunks} in order and return what each call returned.
    """
    return [parser.receive_data(chunk) for chunk in chunks]


def random_splits(data: bytes, rng: random.Random) -> list[bytes]:
    """
    C{data} cut at random points into non-empty chunks.
    """
    cuts = sorted(rng.sample(range(1, len(data)), k=rng.randrange(min(len(data) - 1, 12) + 1)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def live_hello(
    server_name: str | None, alpn: Sequence[str] = (), tls12: bool = False
) -> bytes:
    """
    The first flight this machine's Python C{ssl} sends now, through memory BIOs.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if tls12:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if alpn:
        context.set_alpn_protocols(list(alpn))
    outgoing = ssl.MemoryBIO()
    client = context.wrap_bio(ssl.MemoryBIO(), outgoing, server_hostname=server_name)
    # The handshake stops where it waits for the server: its hello is written by then.
    with contextlib.suppress(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()
