"""
HTTP/2 to visitors where a share ends TLS (e2ee: the agent; inspect: the
relay), with real processes and real clients: curl over HTTP/2, h2load
(Debian's nghttp2-client), and the C{h2} library driving raw frames for
the attacks.  Written once (L{H2Behaviour}) and run for each mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import ssl
import subprocess
import time

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    ResponseReceived,
    StreamEnded,
    StreamReset,
)
from hyperframe.frame import ContinuationFrame, HeadersFrame, PingFrame, SettingsFrame

from bench.budgets import rss

from .harness import StackTestCase, missing
from .test_shares import CURL_TIMEOUT, KIB, MIB, SharePublisher
from .web_service import pattern

#: How far above its idle resident memory the process that ends TLS may go
#: while it streams a large response to a slow reader.
STREAMING_GROWTH = 48 * MIB
#: How far it may go while an attacker is cut off.
ATTACK_GROWTH = 16 * MIB


class H2Client(SharePublisher):
    """
    Reaches a share that ends TLS over HTTP/2.
    """

    def curl2(self, *args: str, urls: list[str]) -> bytes:
        """
        curl over HTTP/2 (TLS, ALPN): the bodies, each followed by a line
        with the HTTP version of its transfer.
        """
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--http2", "--cacert", self.ca,
             "--resolve", f"{self.host}:{self.port}:127.0.0.1", "--write-out",
             r"\n%{http_version}", *args, *urls],
            capture_output=True, timeout=CURL_TIMEOUT, check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"curl failed ({done.returncode}): {done.stderr.decode()}\n"
                                 f"agent:\n{self.agent.output()}")
        return done.stdout

    def enderPid(self) -> int:
        """
        The process that ends the visitors' TLS.
        """
        return (self.agent if self.mode == "e2ee" else self.stack.relay).popen.pid

    def attacker(self) -> tuple[ssl.SSLSocket, H2Connection]:
        """
        An HTTP/2 connection to the share (ALPN h2) whose frames the test
        writes itself.
        """
        context = ssl.create_default_context(cafile=self.ca)
        context.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        tls = context.wrap_socket(raw, server_hostname=self.host)
        self.assertEqual(tls.selected_alpn_protocol(), "h2")
        conn = H2Connection(H2Configuration(client_side=True))
        conn.initiate_connection()
        tls.sendall(conn.data_to_send())
        return tls, conn

    def uploads(self, bodies: list[bytes]) -> list[bytes]:
        """
        POST each of C{bodies} to C{/sha256}, all at once on one HTTP/2
        connection (the C{h2} library, sending as the windows allow); the
        answers, in order.
        """
        tls, conn = self.attacker()
        tls.settimeout(CURL_TIMEOUT)
        left: dict[int, memoryview] = {}
        for body in bodies:
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, [(":method", "POST"), (":path", "/sha256"),
                                    (":scheme", "https"), (":authority", self.host),
                                    ("content-length", str(len(body)))])
            left[sid] = memoryview(body)
        order = list(left)
        answers: dict[int, bytearray] = {sid: bytearray() for sid in order}
        ended: set[int] = set()
        while len(ended) < len(order):
            for sid, body in list(left.items()):
                rest = body
                while rest:
                    size = min(conn.local_flow_control_window(sid),
                               conn.max_outbound_frame_size, len(rest))
                    if size <= 0:
                        break
                    conn.send_data(sid, bytes(rest[:size]))
                    rest = rest[size:]
                left[sid] = rest
                if not rest:
                    conn.end_stream(sid)
                    del left[sid]
            tls.sendall(conn.data_to_send())
            data = tls.recv(65536)
            if not data:
                raise AssertionError("the share closed the connection")
            for event in conn.receive_data(data):
                if isinstance(event, ResponseReceived):
                    self.assertIn((b":status", b"200"), event.headers)
                elif isinstance(event, DataReceived):
                    answers[event.stream_id] += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length,
                                                   event.stream_id)
                elif isinstance(event, StreamEnded):
                    ended.add(event.stream_id)
                elif isinstance(event, StreamReset | ConnectionTerminated):
                    raise AssertionError(f"upload cut: {event}")
            tls.sendall(conn.data_to_send())
        tls.close()
        return [bytes(answers[sid]) for sid in order]

    def assertCutOff(self, tls: ssl.SSLSocket, conn: H2Connection, frames: bytes) -> None:
        """
        After C{frames} the share says GOAWAY (ENHANCE_YOUR_CALM) and closes,
        the process that ends TLS within its memory bound; another visitor
        is served meanwhile.
        """
        pid = self.enderPid()
        before = rss(pid)
        with contextlib.suppress(OSError):  # closed on us while we wrote: as it should
            tls.sendall(frames)
        code, deadline = None, time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                data = tls.recv(65536)
            except OSError:
                break
            if not data:
                break
            try:
                events = conn.receive_data(data)
            except Exception:  # noqa: BLE001 - the attacker's h2 may object; we only read
                break
            for event in events:
                if isinstance(event, ConnectionTerminated):
                    code = event.error_code
        tls.close()
        self.assertEqual(code, ErrorCodes.ENHANCE_YOUR_CALM)
        self.assertLess(rss(pid) - before, ATTACK_GROWTH)
        out = self.curl2(urls=[f"{self.url}bytes/{KIB}"])
        self.assertEqual(out, pattern(KIB) + b"\n2")


class H2Behaviour(H2Client):
    """
    What a share that ends TLS does over HTTP/2.
    """

    def test_getAndPost(self) -> None:
        """
        GETs and a 1 MiB POST go over HTTP/2 and arrive whole.
        """
        url = self.publish()
        out = self.curl2(urls=[f"{url}bytes/{KIB}"])
        self.assertEqual(out, pattern(KIB) + b"\n2")
        data = self.stack.tmp / "upload.bin"
        data.write_bytes(pattern(MIB))
        out = self.curl2("--data-binary", f"@{data}", urls=[f"{url}sha256"])
        self.assertEqual(out, hashlib.sha256(pattern(MIB)).hexdigest().encode() + b"\n2")

    def test_uploadsOnOneAndTenStreams(self) -> None:
        """
        An upload of several MiB on one stream, then ten at once on one
        connection, each reach the service whole (the windows are raised
        above HTTP/2's 65,535 bytes; its backpressure is the unit tests').
        """
        self.publish()
        alone = pattern(4 * MIB)
        self.assertEqual(self.uploads([alone]), [hashlib.sha256(alone).hexdigest().encode()])
        many = [pattern(2 * MIB + n) for n in range(10)]
        self.assertEqual(self.uploads(many),
                         [hashlib.sha256(body).hexdigest().encode() for body in many])

    def test_forwardedHeaders(self) -> None:
        """
        Over HTTP/2 the service gets an HTTP/1.1 head with Host rewritten,
        one X-Forwarded-For naming the visitor, and its own X-Forwarded-For
        dropped.
        """
        url = self.publish()
        out = self.curl2("--header", "X-Forwarded-For: 192.0.2.66", urls=[f"{url}headers"])
        head = out.decode().lower()
        self.assertTrue(head.startswith("get /headers http/1.1\r\n"), head)
        self.assertIn("host: localhost:", head)
        self.assertEqual(head.count("x-forwarded-for: 127.0.0.1\r\n"), 1, head)
        self.assertNotIn("192.0.2.66", head)
        self.assertTrue(head.endswith("\n2"), head)

    def test_earlyHints(self) -> None:
        """
        A 103 Early Hints from the service reaches an HTTP/2 visitor before
        the response, its Link header with it.
        """
        url = self.publish()
        out = self.curl2("--include", urls=[f"{url}hints/bytes/6"]).decode("latin-1").lower()
        self.assertIn("http/2 103", out)
        self.assertIn("link: </style.css>; rel=preload", out)
        self.assertLess(out.index("http/2 103"), out.index("http/2 200"))
        self.assertTrue(out.endswith(pattern(6).decode("latin-1") + "\n2"), out)

    def test_policyPerStream(self) -> None:
        """
        On one HTTP/2 connection, a request with credentials gets the page
        and the next without them 401; the service saw only the first.
        """
        log = self.stack.tmp / "requests.log"
        url = self.publish("--log", str(log), extra=("--basic-auth", "ann:s3cret"))
        done = subprocess.run(
            ["curl", "--silent", "--http2", "--cacert", self.ca, "--resolve",
             f"{self.host}:{self.port}:127.0.0.1", "--output", "/dev/null", "--write-out",
             r"%{http_code} %{http_version} %{num_connects}\n",
             "--user", "ann:s3cret", f"{url}bytes/10", "--next", "--http2", "--cacert",
             self.ca, "--resolve", f"{self.host}:{self.port}:127.0.0.1", "--output",
             "/dev/null", "--write-out", r"%{http_code} %{http_version} %{num_connects}\n",
             f"{url}refused"],
            capture_output=True, text=True, timeout=CURL_TIMEOUT, check=True,
        )
        self.assertEqual(done.stdout.split("\n")[:2], ["200 2 1", "401 2 0"])
        reached = log.read_text()
        self.assertIn("GET /bytes/10", reached)
        self.assertNotIn("refused", reached)

    def test_slowReader(self) -> None:
        """
        A 64 MiB response read at a limited rate arrives whole, the process
        that ends TLS staying within its memory bound.
        """
        url = self.publish()
        pid = self.enderPid()
        idle = rss(pid)
        size = 64 * MIB
        reader = subprocess.Popen(
            ["curl", "--silent", "--http2", "--cacert", self.ca, "--resolve",
             f"{self.host}:{self.port}:127.0.0.1", "--limit-rate", "16M", f"{url}bytes/{size}"],
            stdout=subprocess.PIPE,
        )
        assert reader.stdout is not None
        digest, got, peak = hashlib.sha256(), 0, idle
        while chunk := reader.stdout.read(MIB):
            digest.update(chunk)
            got += len(chunk)
            peak = max(peak, rss(pid))
        reader.wait(CURL_TIMEOUT)
        self.assertEqual(got, size)
        self.assertEqual(digest.digest(), hashlib.sha256(pattern(size)).digest())
        self.assertLess(peak - idle, STREAMING_GROWTH)

    def test_h2load(self) -> None:
        """
        h2load, 200 requests on 2 connections with 10 streams each: all
        succeed over HTTP/2.
        """
        if missing("h2load"):
            self.skipTest(missing("h2load") or "")
        url = self.publish()
        done = subprocess.run(
            ["h2load", "-n", "200", "-c", "2", "-m", "10", "--connect-to",
             f"127.0.0.1:{self.port}", f"{url}bytes/{KIB}"],
            capture_output=True, text=True, timeout=CURL_TIMEOUT, check=False,
        )
        self.assertIn("200 succeeded", done.stdout, done.stdout + done.stderr)
        self.assertIn("h2", done.stdout)

    def test_rapidReset(self) -> None:
        """
        Requests opened and reset at once, many times: cut off.
        """
        self.publish()
        tls, conn = self.attacker()
        frames = b""
        for _ in range(400):
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, [(":method", "GET"), (":path", "/bytes/1"),
                                    (":scheme", "https"), (":authority", self.host)])
            conn.reset_stream(sid, ErrorCodes.CANCEL)
            frames += conn.data_to_send()
        self.assertCutOff(tls, conn, frames)

    def test_continuationFlood(self) -> None:
        """
        A header block that never ends: cut off.
        """
        self.publish()
        tls, conn = self.attacker()
        frames = HeadersFrame(1, data=b"\x82").serialize() + b"".join(
            ContinuationFrame(1, data=b"\x00" * 1000).serialize() for _ in range(500))
        self.assertCutOff(tls, conn, frames)

    def test_pingAndSettingsFlood(self) -> None:
        """
        PINGs and SETTINGS by the hundred: cut off.
        """
        self.publish()
        tls, conn = self.attacker()
        frames = (PingFrame(0, opaque_data=b"12345678").serialize()
                  + SettingsFrame(0).serialize()) * 500
        self.assertCutOff(tls, conn, frames)


class E2EEH2Tests(H2Behaviour, StackTestCase):
    """
    HTTP/2 to an e2ee share: the agent ends TLS.
    """

    skip = missing("curl")
    mode = "e2ee"


class InspectH2Tests(H2Behaviour, StackTestCase):
    """
    HTTP/2 to an inspect share: the relay ends TLS.
    """

    skip = missing("curl")
    mode = "inspect"


class ConfiguredLimitTests(H2Client, StackTestCase):
    """
    The HTTP/2 limits an operator sets reach the process that ends TLS:
    the agent's C{--h2-limits} for an e2ee share.
    """

    mode = "e2ee"
    skip = missing("curl")
    #: SETTINGS and PINGs within the default limit (100) but over the one set.
    FLOOD = 20

    def publishLimited(self) -> None:
        """
        Publish the share with a limit of 5 SETTINGS and PINGs.
        """
        self.publish(extra=("--h2-limits", "max-control-frames=5"))

    def test_controlFramesLimit(self) -> None:
        """
        20 PINGs, under the default limit, are over the limit set: cut off.
        """
        self.publishLimited()
        tls, conn = self.attacker()
        self.assertCutOff(tls, conn, PingFrame(0, opaque_data=b"12345678").serialize()
                          * self.FLOOD)


class InspectConfiguredLimitTests(ConfiguredLimitTests):
    """
    The same with the relay's C{--h2-limits} for an inspect share.
    """

    mode = "inspect"
    relay_extra = ("--h2-limits", "max-control-frames=5")

    def publishLimited(self) -> None:
        """
        Publish the share; the relay has the limit.
        """
        self.publish()
