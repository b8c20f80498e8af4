"""
A naive HTTP/1.1 service that records what it reads, for the smuggling
tests, run as its own process:

    python -m tests.integration.recording_service --port-file F --log FILE

It listens on 127.0.0.1, port 0, writes the bound port to F, and frames
requests the way C{http.server}-style development servers do, the kind a
request smuggled past a proxy desynchronises: a head is read line by line
up to an empty line (a bare LF ends a line too), then as many body bytes as
its first C{Content-Length} says; C{Transfer-Encoding} is ignored.  Each
request is appended to FILE as one JSON line C{{"conn": N, "head": ...,
"body": ...}} (head and body exactly as read, Latin-1), and only then
answered, C{200} with the body C{answer to REQUEST-LINE}, keeping the
connection open.  So once a test has its response, the record is written.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json

from .service import publish_port

MAX_HEAD = 64 * 1024


async def read_head(reader: asyncio.StreamReader) -> bytes | None:
    """
    The raw bytes of one head, its empty line included; L{None} at the end
    of input or for a head too long.
    """
    head = bytearray()
    while len(head) <= MAX_HEAD:
        line = await reader.readline()
        if not line:
            return None
        head += line
        if line in (b"\r\n", b"\n") and len(head) > len(line):
            return bytes(head)
    return None


def content_length(head: bytes) -> int:
    """
    The first C{Content-Length} of C{head}, read naively (0 if none).
    """
    for line in head.split(b"\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                return int(value.split(b",")[0].strip())
            except ValueError:
                return 0
    return 0


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, log: str,
                conn: int) -> None:
    """
    Serve one connection, recording each request.
    """
    try:
        while (head := await read_head(reader)) is not None:
            body = await reader.readexactly(content_length(head))
            record = {"conn": conn, "head": head.decode("latin-1"),
                      "body": body.decode("latin-1")}
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            answer = b"answer to " + head.split(b"\n")[0].rstrip(b"\r")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(answer), answer))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main(port_file: str, log: str) -> None:
    """
    Listen, publish the port, serve forever.
    """
    counter = itertools.count(1)
    server = await asyncio.start_server(
        lambda r, w: serve(r, w, log, next(counter)), "127.0.0.1", 0, limit=MAX_HEAD
    )
    publish_port(port_file, server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    asyncio.run(main(args.port_file, args.log))
