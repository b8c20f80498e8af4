"""
A small HTTP/1.1 service for the share-URL tests, run as its own process:

    python -m tests.integration.web_service --port-file F [--close] [--tls CERT KEY]

It listens on 127.0.0.1, port 0, writes the bound port to F, and answers:

  - C{GET /bytes/N}: N pattern bytes (L{pattern}), with a Content-Length and
    keep-alive; with C{--close}, without a length, then it closes (the
    service that writes and closes at once: the classic data-and-close race);
  - C{POST /sha256}: the hex SHA-256 of the body (Content-Length bodies);
  - C{GET /headers}: the request's head, as received;
  - C{GET /ws}: a WebSocket echo (RFC 6455 framing, text and binary, close);
  - C{GET /hints/PATH}: a C{103 Early Hints} (L{EARLY_HINTS}), then C{PATH}'s answer;
  - C{GET /page}: a small HTML page (L{PAGE}) for browsers: a title, the
    marker L{PAGE_MARKER}, and a script that writes the protocol the
    browser fetched it with (C{nextHopProtocol}) into C{<p id="protocol">}.

With C{--tls} it ends TLS itself (a passthrough share's service); with
C{--log FILE} it appends each request line it receives to FILE (so a test
can check what reached the service).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import ssl
import struct

from .service import publish_port

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_HEAD = 64 * 1024
#: What C{/hints/PATH} sends before its response.
EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
PAGE_TITLE = "nfltr share page"
PAGE_MARKER = "nfltr-page-marker-6c1f0e"
PAGE = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{PAGE_TITLE}</title></head>
<body><p id="marker">{PAGE_MARKER}</p><p id="protocol"></p>
<script>
document.getElementById("protocol").textContent =
  performance.getEntriesByType("navigation")[0].nextHopProtocol;
</script></body></html>
""".encode()


def pattern(size: int) -> bytes:
    """
    The bytes C{/bytes/N} sends: a repeating 251-byte cycle, so a lost or
    moved byte shows.
    """
    cycle = bytes(range(251))
    return (cycle * (size // 251 + 1))[:size]


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return method, target, headers, head


async def _websocket(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     headers: dict[str, str]) -> None:
    key = headers["sec-websocket-key"].encode()
    accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest())
    writer.write(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
    )
    while True:
        first, second = await reader.readexactly(2)
        opcode, length = first & 0x0F, second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", await reader.readexactly(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", await reader.readexactly(8))
        mask = await reader.readexactly(4) if second & 0x80 else b"\0\0\0\0"
        payload = bytearray(await reader.readexactly(length))
        for i in range(length):
            payload[i] ^= mask[i % 4]
        if length < 126:
            header = bytes([0x80 | opcode, length])
        elif length < 65536:
            header = bytes([0x80 | opcode, 126]) + struct.pack("!H", length)
        else:
            header = bytes([0x80 | opcode, 127]) + struct.pack("!Q", length)
        writer.write(header + bytes(payload))
        await writer.drain()
        if opcode == 0x8:
            return


def _response(status: str, body: bytes, close: bool,
              content_type: str = "application/octet-stream") -> bytes:
    if close:
        return (
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n"
        ).encode() + body
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _hinted(writer: asyncio.StreamWriter, target: str) -> str:
    """
    For C{/hints/PATH}: write L{EARLY_HINTS}; the C{PATH} to answer.
    """
    if not target.startswith("/hints/"):
        return target
    writer.write(EARLY_HINTS)
    return target.removeprefix("/hints")


#: With --log FILE: every request line received is appended to it.
REQUEST_LOG: list[str] = []


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, close: bool) -> None:
    """
    Serve one connection's requests.
    """
    try:
        while (request := await _read_head(reader)) is not None:
            method, target, headers, head = request
            if REQUEST_LOG:
                with open(REQUEST_LOG[0], "a") as log:
                    log.write(f"{method} {target}\n")
            if target == "/ws" and headers.get("upgrade", "").lower() == "websocket":
                await _websocket(reader, writer, headers)
                return
            target = _hinted(writer, target)
            if method == "POST" and target == "/sha256":
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                answer = hashlib.sha256(body).hexdigest().encode()
            elif target.startswith("/bytes/"):
                answer = pattern(int(target.removeprefix("/bytes/")))
            elif target.split("?")[0] == "/headers":
                answer = head
            elif target == "/page":
                writer.write(_response("200 OK", PAGE, close, "text/html; charset=utf-8"))
                answer = None

            else:
                writer.write(_response("404 Not Found", b"no such path\n", close))
                answer = None
            if answer is not None:
                writer.write(_response("200 OK", answer, close))
            await writer.drain()
            if close or headers.get("connection", "").lower() == "close":
                return
    except (ConnectionError, asyncio.IncompleteReadError, ValueError, KeyError):
        pass
    finally:
        writer.close()


async def main(port_file: str, close: bool, tls: list[str] | None, port: int = 0) -> None:
    """
    Listen, write the port, serve forever.
    """
    context = None
    if tls:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls[0], tls[1])
    server = await asyncio.start_server(
        lambda r, w: serve(r, w, close), "127.0.0.1", port, ssl=context, limit=MAX_HEAD
    )
    publish_port(port_file, server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--close", action="store_true")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--log")
    parser.add_argument("--port", type=int, default=0)  # a service restarted on its port
    args = parser.parse_args()
    if args.log:
        REQUEST_LOG.append(args.log)
    asyncio.run(main(args.port_file, args.close, args.tls, args.port))
