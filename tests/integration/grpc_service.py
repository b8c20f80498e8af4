"""
A small gRPC service (grpcio, h2c with prior knowledge) for the share
tests, run as its own process:

    python -m tests.integration.grpc_service --port-file F

It listens on 127.0.0.1, port 0, writes the bound port to F, and answers
three methods of the service C{nfltr.test.Echo}, whose messages are raw
bytes (no protobuf):

  - C{Unary}: C{b"echo:"} and the request;
  - C{Stream}: for a request C{b"COUNT SIZE"}, COUNT messages of SIZE
    pattern bytes (L{tests.integration.web_service.pattern}), each message
    its own slice of one long pattern;
  - C{Fail}: ends with status C{NOT_FOUND} and the request as details (a
    grpc-status trailer other than 0).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

from .service import publish_port
from .web_service import pattern

SERVICE = "nfltr.test.Echo"


def _same(data: bytes) -> bytes:
    return data


def unary(request: bytes, context: Any) -> bytes:
    """
    Echo.
    """
    return b"echo:" + request


def stream(request: bytes, context: Any) -> Iterator[bytes]:
    """
    COUNT messages of SIZE bytes.
    """
    count, size = (int(x) for x in request.split())
    whole = pattern(size * 2 + 251)
    for i in range(count):
        offset = (i * size) % 251
        yield whole[offset:offset + size]


def fail(request: bytes, context: Any) -> bytes:
    """
    NOT_FOUND, with the request as details.
    """
    context.abort(grpc.StatusCode.NOT_FOUND, request.decode())
    raise AssertionError("abort returns no more")


def main() -> None:
    """
    Serve until killed.
    """
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, _same, _same),
        "Stream": grpc.unary_stream_rpc_method_handler(stream, _same, _same),
        "Fail": grpc.unary_unary_rpc_method_handler(fail, _same, _same),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    publish_port(args.port_file, port)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
