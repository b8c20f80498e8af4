"""
Request smuggling and forwarded headers through share URLs, with real
processes (issue 15): a relay, C{nfltr http} agents, and services that
record every request head and body exactly as they read them
(L{tests.integration.recording_service}, which frames by C{Content-Length}
alone, as development servers do).  Requests are raw bytes from the test,
over real TLS to the relay's TLS port, or plain TCP to its HTTP port.

The behaviour is written once (L{SmugglingBehaviour}) and run for the
inspect mode (the relay ends TLS and proxies), the e2ee mode (the agent
does), e2ee with C{--basic-auth} (every case carries the right credentials,
so the gate lets it through), and the relay's plain-HTTP port.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import sys
from typing import Any

from nfltr.cli.processes import wait_for_file

from .harness import StackTestCase

TIMEOUT = 60.0

#: Cases no two parsers may frame differently, each hiding a request
#: C{/smuggled-NAME} that must never reach a service.  C{{base}} is the
#: C{Host} line (and credentials); C{{hidden}} the hidden request.
REFUSED = {
    "clte": b"POST /case-clte HTTP/1.1\r\n{base}Content-Length: {clte}\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n{hidden}",
    "tecl": b"POST /case-tecl HTTP/1.1\r\n{base}Transfer-Encoding: chunked\r\n"
            b"Content-Length: 4\r\n\r\n{chunk}\r\n0\r\n\r\n",
    "clcl": b"POST /case-clcl HTTP/1.1\r\n{base}Content-Length: 0\r\nContent-Length: {size}"
            b"\r\n\r\n{hidden}",
    "cllist": b"POST /case-cllist HTTP/1.1\r\n{base}Content-Length: 0, {size}\r\n\r\n{hidden}",
    "notlast": b"POST /case-notlast HTTP/1.1\r\n{base}Transfer-Encoding: chunked, identity\r\n"
               b"\r\n{chunk}\r\n0\r\n\r\n",
    "gzip": b"POST /case-gzip HTTP/1.1\r\n{base}Transfer-Encoding: gzip\r\n\r\n{hidden}",
    "te10": b"POST /case-te10 HTTP/1.0\r\n{base}Transfer-Encoding: chunked\r\n\r\n"
            b"{chunk}\r\n0\r\n\r\n",
    "foldte": b"POST /case-foldte HTTP/1.1\r\n{base}Content-Length: {clte}\r\n"
              b"Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n{hidden}",
    "lfte": b"POST /case-lfte HTTP/1.1\r\n{base}Content-Length: {clte}\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n{hidden}",
    # Repaired by the full proxy, refused by the stream path every share
    # takes (it forwards heads as they came: nothing in doubt goes on).
    "fold": b"GET /case-fold HTTP/1.1\r\n{base}X-Folded: a\r\n b\r\n\r\n",
    "lf": b"POST /case-lf HTTP/1.1\n{base}Content-Length: 2\n\nok",
}


def framing_problems(head: str) -> list[str]:
    """
    What in a recorded head two parsers could frame differently (empty if
    nothing).
    """
    lines = head.split("\n")
    problems = []
    if not head.endswith("\r\n\r\n") or any(not line.endswith("\r") for line in lines[:-1]):
        problems.append("a line not ended by CRLF")
    if any(line[:1] in (" ", "\t") for line in lines[1:]):
        problems.append("an obs-fold")
    names = [line.partition(":")[0].strip().lower() for line in lines[1:-2]]
    values = {line.partition(":")[0].strip().lower(): line.partition(":")[2].strip()
              for line in lines[1:-2]}
    if names.count("content-length") > 1 or names.count("transfer-encoding") > 1:
        problems.append("a repeated length header")
    if "content-length" in names and "transfer-encoding" in names:
        problems.append("Content-Length with Transfer-Encoding")
    if values.get("transfer-encoding", "chunked") != "chunked":
        problems.append("a Transfer-Encoding other than chunked")
    if not lines[0].endswith("HTTP/1.1\r"):
        problems.append("not HTTP/1.1")
    return problems


class _Reader:
    """
    What C{http.client.HTTPResponse} takes for a socket (it calls only
    C{makefile}), and for the file it reads: the one reader of several
    responses in turn, which a response's end does not close.
    """

    def __init__(self, reader: Any) -> None:
        self.reader = reader

    def makefile(self, mode: str) -> _Reader:
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)

    def close(self) -> None:
        """
        Left open for the next response.
        """


class SmugglingBehaviour:
    """
    What every path to a share must do with smuggling attempts.  Mixed into
    a L{StackTestCase} with C{mode}, C{plain} and C{auth} set.
    """

    mode: str
    plain = False
    auth: tuple[str, ...] = ()
    stack: Any
    name = "blog"

    def recording_service(self, label: str) -> tuple[int, Any]:
        """
        Start a recording service; its port and log file.
        """
        log = self.stack.tmp / f"{label}.jsonl"
        log.touch()
        port_file = self.stack.tmp / f"{label}.port"
        self.stack.start([sys.executable, "-m", "tests.integration.recording_service",
                          "--port-file", str(port_file), "--log", str(log)], label)
        return int(wait_for_file(port_file)), log

    def publish(self, other: bool = False) -> None:
        """
        Publish C{blog} (and C{other}, with its own service, if asked) in
        this class's mode.
        """
        key = self.stack.key("alice")
        self.ca = str(self.stack.data / "tls" / "share-ca.crt")
        port, self.log = self.recording_service("blog-service")
        extra = ("--mode", self.mode, "--plain-http", "true" if self.plain else "false")
        _, url = self.stack.http_agent(key, self.name, port, *extra, *self.auth)
        self.tlsPort = int(url.rsplit(":", 1)[1].rstrip("/"))
        self.httpPort = int(self.stack.info["http"].rsplit(":", 1)[1])
        self.host = f"{self.name}.localhost"
        self.port = self.httpPort if self.plain else self.tlsPort
        self.otherLog = None
        if other:
            otherPort, self.otherLog = self.recording_service("other-service")
            self.stack.http_agent(key, "other", otherPort, *extra)

    def base(self, host: str | None = None) -> bytes:
        """
        The C{Host} line (and the right credentials, with C{--basic-auth}).
        """
        line = f"Host: {host or self.host}:{self.port}\r\n".encode()
        if self.auth:
            line += b"Authorization: Basic " + base64.b64encode(b"ann:s3cret") + b"\r\n"
        return line

    def connect(self) -> socket.socket:
        """
        A connection to the share as a visitor makes it.
        """
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT)
        if self.plain:
            return raw
        context = ssl.create_default_context(cafile=self.ca)
        return context.wrap_socket(raw, server_hostname=self.host)

    def responses(self, raw: bytes, count: int = 1) -> list[tuple[int, bytes]]:
        """
        Send C{raw} on a new connection; the status and body of the first
        C{count} responses.
        """
        out = []
        with self.connect() as sock, sock.makefile("rb") as reader:
            sock.sendall(raw)
            for _ in range(count):
                # One buffered reader for all: each response starts where the last ended.
                response = http.client.HTTPResponse(_Reader(reader), method="GET")
                response.begin()
                out.append((response.status, response.read()))
        return out

    def records(self, log: Any = None) -> list[dict[str, Any]]:
        """
        What a service recorded (C{blog}'s by default).
        """
        text = (log or self.log).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines()]

    def case(self, template: bytes, name: str) -> bytes:
        """
        A case's bytes: its hidden request C{/smuggled-NAME} filled in.
        """
        hidden = b"GET /smuggled-%s HTTP/1.1\r\n%s\r\n" % (name.encode(), self.base())
        chunk = b"%x\r\n%s" % (len(hidden), hidden)
        return (template.replace(b"{base}", self.base()).replace(b"{hidden}", hidden)
                .replace(b"{chunk}", chunk).replace(b"{size}", b"%d" % len(hidden))
                .replace(b"{clte}", b"%d" % (5 + len(hidden))))

    def test_framing(self) -> None:
        """
        Every L{REFUSED} case is refused, none of it recorded; a request
        for another share on a connection of this one gets 421 and reaches
        no service; every recorded head is canonical and no hidden request
        was ever read as one.
        """
        self.publish(other=True)
        for name, template in REFUSED.items():
            [(status, _)] = self.responses(self.case(template, name))
            self.assertGreaterEqual(status, 400, name)
        first = b"GET /case-host HTTP/1.1\r\n%s\r\n" % self.base()
        misdirected = b"GET /case-misdirected HTTP/1.1\r\n%s\r\n" % self.base("other.localhost")
        statuses = [status for status, _ in self.responses(first + misdirected, 2)]
        self.assertEqual(statuses, [200, 421])
        if not self.plain:
            # Over TLS the name was chosen by SNI; on the HTTP port a new
            # connection naming the other share is that share's.
            [(status, _)] = self.responses(misdirected)
            self.assertEqual(status, 421)
        records = self.records()
        targets = [r["head"].split(" ")[1] for r in records]
        self.assertEqual(targets, ["/case-host"])
        self.assertEqual(self.records(self.otherLog), [])
        for record in records:
            self.assertEqual(framing_problems(record["head"]), [], record["head"])
            self.assertNotIn("smuggled", record["body"])

    def test_capturedNextRequest(self) -> None:
        """
        An attacker's CL.TE hides a C{POST /capture} sized to take the next
        request on the pooled service connection as its body; then a victim
        sends a request with a cookie: the victim gets its own answer, its
        cookie is in no request but its own, and C{/capture} never reaches
        the service.
        """
        self.publish()
        victim = b"GET /victim HTTP/1.1\r\n%sCookie: session=VICTIM-SECRET\r\n\r\n" % self.base()
        hidden = (b"POST /capture HTTP/1.1\r\n%sContent-Length: %d\r\n\r\ncomment="
                  % (self.base(), len(victim)))
        attack = (b"POST /post HTTP/1.1\r\n%sContent-Length: 4\r\nTransfer-Encoding: chunked"
                  b"\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (self.base(), len(hidden), hidden))
        # Warm the pool, so the attack and the victim share a connection.
        self.assertEqual(self.responses(b"GET /warm HTTP/1.1\r\n%s\r\n" % self.base())[0][0], 200)
        self.responses(attack)
        [(status, body)] = self.responses(victim)
        self.assertEqual((status, body), (200, b"answer to GET /victim HTTP/1.1"))
        records = self.records()
        for record in records:
            if "VICTIM-SECRET" in record["head"] + record["body"]:
                self.assertTrue(record["head"].startswith("GET /victim "), record)
                self.assertNotIn("VICTIM-SECRET", record["body"])
        self.assertNotIn("/capture", json.dumps(records))

    def test_forwardedHeaders(self) -> None:
        """
        The visitor's forwarding headers never reach the service: it gets
        ours (the real address, the share's host); two C{Authorization}
        headers are a 400 and reach nothing.
        """
        self.publish()
        spoof = (b"X-Forwarded-For: 198.51.100.1\r\nX-Forwarded-Host: evil.example\r\n"
                 b"Forwarded: for=198.51.100.1;host=evil.example\r\nX-Real-IP: 198.51.100.1\r\n"
                 b"X_Forwarded_For: 198.51.100.1\r\nX-Forwarded-Proto: gopher\r\n")
        raw = b"GET /forwarded HTTP/1.1\r\n%s%s\r\n" % (self.base(), spoof)
        self.assertEqual(self.responses(raw)[0][0], 200)
        [record] = self.records()
        head = record["head"].lower()
        for spoofed in ("198.51.100.1", "evil.example", "gopher"):
            self.assertNotIn(spoofed, head)
        self.assertIn("\r\nx-forwarded-for: 127.0.0.1\r\n", head)
        self.assertIn(f"\r\nx-forwarded-host: {self.host}:{self.port}\r\n", head)
        scheme = "http" if self.plain else "https"
        self.assertIn(f"\r\nx-forwarded-proto: {scheme}\r\n", head)
        self.assertEqual(head.count("forwarded: for="), 1)
        twice = b"Authorization: Basic " + base64.b64encode(b"ann:s3cret") + b"\r\n"
        twice += b"Authorization: Bearer other\r\n"
        raw = b"GET /twice HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n" % (self.host.encode(), self.port,
                                                                twice)
        self.assertEqual(self.responses(raw)[0][0], 400)
        self.assertEqual(len(self.records()), 1)


class InspectSmugglingTests(SmugglingBehaviour, StackTestCase):
    """
    C{--mode inspect}: the relay's proxy, then the agent's.
    """

    mode = "inspect"


class E2EESmugglingTests(SmugglingBehaviour, StackTestCase):
    """
    C{--mode e2ee}: the agent's proxy.
    """

    mode = "e2ee"


class E2EEBasicAuthSmugglingTests(SmugglingBehaviour, StackTestCase):
    """
    C{--mode e2ee --basic-auth}: the agent's proxy and its credential gate.
    """

    mode = "e2ee"
    auth = ("--basic-auth", "ann:s3cret")


class PlainSmugglingTests(SmugglingBehaviour, StackTestCase):
    """
    The relay's plain-HTTP port (C{--plain-http true}): its router, then
    the relay's proxy, then the agent's.
    """

    mode = "e2ee"
    plain = True

