"""
A small TCP service for the integration tests, run as its own process:

    python -m tests.integration.service --port-file F [--burst N]

It listens on 127.0.0.1, port 0, writes the bound port to F, and serves:

  - with --burst N: to every connection, N pattern bytes at once, then close
    (a service that writes and closes without waiting);
  - otherwise one command line per connection:
      ECHO\n              echo every byte back until the client closes;
      UPLOAD n\n          read n bytes, answer their sha256 hex and close;
      DOWNLOAD n seed\n   send n pattern bytes (seeded) and close;
      ZEROS n\n           send n zero bytes, generated as they go out, and close;
      MARKER text\n       send text back and close.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random

CHUNK = 256 * 1024


def pattern(seed: int, size: int) -> bytes:
    """
    The deterministic bytes DOWNLOAD and --burst send.
    """
    return random.Random(seed).randbytes(size)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(CHUNK):
        writer.write(data)
        await writer.drain()


async def _upload(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    digest = hashlib.sha256()
    left = n
    while left:
        data = await reader.read(min(CHUNK, left))
        if not data:
            return
        digest.update(data)
        left -= len(data)
    writer.write(digest.hexdigest().encode() + b"\n")


async def _download(writer: asyncio.StreamWriter, n: int, seed: int) -> None:
    data = pattern(seed, n)
    for i in range(0, n, CHUNK):
        writer.write(data[i:i + CHUNK])
        await writer.drain()


async def _zeros(writer: asyncio.StreamWriter, n: int) -> None:
    block = bytes(CHUNK)
    for i in range(0, n, CHUNK):
        writer.write(block[: min(CHUNK, n - i)])
        await writer.drain()


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, burst: int) -> None:
    """
    Serve one connection.
    """
    try:
        if burst:
            writer.write(pattern(burst, burst))
        else:
            words = (await reader.readline()).decode().split()
            if words[:1] == ["ECHO"]:
                await _echo(reader, writer)
            elif words[:1] == ["UPLOAD"]:
                await _upload(reader, writer, int(words[1]))
            elif words[:1] == ["DOWNLOAD"]:
                await _download(writer, int(words[1]), int(words[2]))
            elif words[:1] == ["ZEROS"]:
                await _zeros(writer, int(words[1]))
            elif words[:1] == ["MARKER"]:
                writer.write(" ".join(words[1:]).encode() + b"\n")
        await writer.drain()
    except (ConnectionError, IndexError, ValueError):
        pass
    finally:
        writer.close()


def publish_port(port_file: str, port: int) -> None:
    """
    Write C{port} to C{port_file} atomically (readers see no file or the
    whole port), for the test that started this service.
    """
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, port_file)


async def main(port_file: str, burst: int) -> None:
    """
    Listen, publish the port, serve forever.
    """
    server = await asyncio.start_server(
        lambda r, w: serve(r, w, burst), "127.0.0.1", 0, limit=CHUNK
    )
    publish_port(port_file, server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--burst", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(main(args.port_file, args.burst))
