"""
gRPC through a share whose service speaks h2c (C{--service-protocol
h2c}), with real processes: a grpcio service
(L{tests.integration.grpc_service}), the relay, the agent, and a grpcio
client reaching the share's URL with its name (SNI) and the share CA.
Written once (L{GRPCBehaviour}) and run for each mode that takes it.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from typing import Any
from urllib.parse import urlsplit

from bench.budgets import rss

from .harness import StackTestCase, missing
from .test_shares import CURL_TIMEOUT, KIB, MIB
from .web_service import pattern

try:
    import grpc
except ImportError:  # pragma: no cover - a test extra
    grpc = None

#: How far above its idle resident memory the process that ends TLS may go
#: while a slow client reads a large streamed response.
STREAMING_GROWTH = 48 * MIB
#: Seconds a call may take.
CALL_TIMEOUT = 60.0


def _same(data: bytes) -> bytes:
    return data


class GRPCBehaviour:
    """
    What a share of an h2c service does for gRPC clients.  Mixed into a
    L{StackTestCase} with C{mode} set.
    """

    mode: str
    name = "rpc"
    stack: Any

    def publish(self) -> str:
        """
        Start the gRPC service and an agent sharing it over h2c; the URL.
        """
        self.ca = str(self.stack.data / "tls" / "share-ca.crt")
        port = self.stack.grpc_service()
        self.agent, url = self.stack.http_agent(
            self.stack.key("alice"), self.name, port, "--mode", self.mode,
            "--service-protocol", "h2c")
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port
        return url

    def channel(self) -> Any:
        """
        A gRPC channel to the share: the relay's address, the share's name
        for SNI and the certificate check, the share CA.
        """
        with open(self.ca, "rb") as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
        channel = grpc.secure_channel(
            f"127.0.0.1:{self.port}", credentials,
            options=[("grpc.ssl_target_name_override", self.host)])
        self.addCleanup(channel.close)
        return channel

    def test_unary(self) -> None:
        """
        A unary call comes back whole, with status OK (the grpc-status
        trailer reached the client).
        """
        self.publish()
        call = self.channel().unary_unary(
            "/nfltr.test.Echo/Unary", request_serializer=_same, response_deserializer=_same)
        answer, outcome = call.with_call(b"hello" * 1000, timeout=CALL_TIMEOUT)
        self.assertEqual(answer, b"echo:" + b"hello" * 1000)
        self.assertEqual(outcome.code(), grpc.StatusCode.OK)

    def test_statusTrailer(self) -> None:
        """
        A call the service ends with NOT_FOUND gets that status and its
        details: the trailers passed through.
        """
        self.publish()
        call = self.channel().unary_unary(
            "/nfltr.test.Echo/Fail", request_serializer=_same, response_deserializer=_same)
        with self.assertRaises(grpc.RpcError) as caught:
            call(b"no such thing", timeout=CALL_TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertEqual(caught.exception.details(), "no such thing")

    def test_serverStreaming(self) -> None:
        """
        A server-streaming call of 100 messages arrives in order, then OK.
        """
        self.publish()
        call = self.channel().unary_stream(
            "/nfltr.test.Echo/Stream", request_serializer=_same, response_deserializer=_same)
        responses = call(b"100 1000", timeout=CALL_TIMEOUT)
        got = list(responses)
        self.assertEqual(len(got), 100)
        self.assertEqual(got[0], pattern(1000))
        self.assertEqual(responses.code(), grpc.StatusCode.OK)

    def test_slowStreamingClient(self) -> None:
        """
        32 MiB streamed in 64 KiB messages to a client that reads slowly
        arrive whole, the process that ends TLS staying within its memory
        bound.
        """
        self.publish()
        pid = (self.agent if self.mode == "e2ee" else self.stack.relay).popen.pid
        idle = rss(pid)
        call = self.channel().unary_stream(
            "/nfltr.test.Echo/Stream", request_serializer=_same, response_deserializer=_same)
        size, count = 64 * KIB, 512
        responses = call(b"%d %d" % (count, size), timeout=CALL_TIMEOUT * 2)
        digest, got, peak = hashlib.sha256(), 0, idle
        expected = hashlib.sha256()
        whole = pattern(size * 2 + 251)
        for i, message in enumerate(responses):
            digest.update(message)
            offset = (i * size) % 251
            expected.update(whole[offset:offset + size])
            got += len(message)
            if i % 16 == 0:
                peak = max(peak, rss(pid))
                time.sleep(0.05)
        self.assertEqual(got, size * count)
        self.assertEqual(digest.digest(), expected.digest())
        self.assertLess(peak - idle, STREAMING_GROWTH)

    def test_http1Refused(self) -> None:
        """
        An HTTP/1.1 visitor gets 502 saying the share speaks HTTP/2 only.
        """
        url = self.publish()
        if missing("curl"):
            self.skipTest(missing("curl") or "")
        done = subprocess.run(
            ["curl", "--silent", "--http1.1", "--cacert", self.ca, "--resolve",
             f"{self.host}:{self.port}:127.0.0.1", "--write-out", r"\n%{http_code}", url],
            capture_output=True, text=True, timeout=CURL_TIMEOUT, check=False,
        )
        self.assertIn("HTTP/2 only", done.stdout)
        self.assertTrue(done.stdout.endswith("\n502"), done.stdout)


class E2EEGRPCTests(GRPCBehaviour, StackTestCase):
    """
    gRPC through an e2ee share: the agent ends TLS and speaks h2c to the
    service.
    """

    skip = "grpcio is not installed (a test extra)" if grpc is None else None
    mode = "e2ee"



class InspectGRPCTests(GRPCBehaviour, StackTestCase):
    """
    gRPC through an inspect share: the relay ends TLS and speaks h2c in
    its sessions to the agent, which splices them to the service.
    """

    skip = "grpcio is not installed (a test extra)" if grpc is None else None
    mode = "inspect"
