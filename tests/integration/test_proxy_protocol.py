"""
The PROXY protocol with real processes: nginx (C{listen ... proxy_protocol},
C{$proxy_protocol_addr} in its log) behind an agent run with
C{--proxy-protocol v1|v2} sees the visitor's address; haproxy (Debian) in
front of the relay sends PROXY v2, and the relay's per-source limits and
allow lists apply to the clients it names; a header from a source the relay
does not trust is refused.

Visitors connect from distinct loopback addresses (127.0.0.3, ...: all of
127/8 is the loopback on Linux), haproxy from 127.0.0.2.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.proxy_protocol import V1, encode

from .harness import Process, Stack, missing
from .test_public_ports import free_ports

BALANCER = "127.0.0.2"
TIMEOUT = 30.0


def start_nginx(stack: Stack, port: int, tls: Path | None = None, *,
                proxy_protocol: bool = True,
                log_format: str = "$proxy_protocol_addr $request") -> Path:
    """
    nginx on 127.0.0.1:C{port}, reading a PROXY header on each connection
    (unless not C{proxy_protocol}) and logging C{log_format} (by default
    C{$proxy_protocol_addr} and the request line) for each request; its log.
    With C{tls}, a directory holding C{cert.pem} and C{key.pem}, it ends
    TLS after the header.
    """
    root = stack.tmp / f"nginx-{port}"
    root.mkdir()
    log = root / "access.log"
    log.touch()
    conf = root / "nginx.conf"
    conf.write_text(f"""
daemon off;
master_process off;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    log_format proxied '{log_format}';
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port} {"ssl " if tls else ""}{"proxy_protocol" if proxy_protocol else ""};
        {f"ssl_certificate {tls}/cert.pem; ssl_certificate_key {tls}/key.pem;" if tls else ""}
        access_log {log} proxied;
        location / {{ return 200 "ok\\n"; }}
    }}
}}
""")
    stack.processes.append(Process(["nginx", "-p", str(root), "-c", str(conf), "-e",
                                    str(root / "error.log")], name="nginx"))
    wait_listening(port)
    return log


def start_haproxy(stack: Stack, port: int, relay_port: int) -> None:
    """
    haproxy on 127.0.0.1:C{port} in TCP mode, connecting to the relay's
    C{relay_port} from L{BALANCER} and sending PROXY v2 first.
    """
    conf = stack.tmp / "haproxy.cfg"
    conf.write_text(f"""
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend visitors
    bind 127.0.0.1:{port}
    default_backend relay
backend relay
    server relay 127.0.0.1:{relay_port} send-proxy-v2 source {BALANCER}
""")
    stack.processes.append(Process(["haproxy", "-db", "-f", str(conf)], name="haproxy"))
    wait_listening(port)


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


def connect(port: int, source: str) -> socket.socket:
    """
    A connection to 127.0.0.1:C{port} from C{source}.
    """
    sock = socket.socket()
    sock.settimeout(TIMEOUT)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def get(port: int, source: str, path: str, prefix: bytes = b"") -> bytes:
    """
    C{GET path} from C{source} through C{port}: the answer, or b"" if the
    connection was closed or reset without one.
    """
    with connect(port, source) as sock:
        sock.sendall(prefix + f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        chunks = []
        try:
            while data := sock.recv(65536):
                chunks.append(data)
        except ConnectionResetError:
            pass
        return b"".join(chunks)


def hold(port: int, source: str) -> socket.socket:
    """
    A connection from C{source} through C{port} that the relay admitted and
    keeps (an unfinished request: nginx waits).  The relay frees the slot
    of C{source}'s previous connection only once that connection's session
    ended, a moment after its answer: a connection refused meanwhile (closed
    at once) is made again, until one stays open for a second.
    """
    deadline = time.monotonic() + TIMEOUT
    while True:
        sock = connect(port, source)
        sock.sendall(b"GET /held HTTP/1.0\r\n")
        sock.settimeout(1)
        try:
            closed = sock.recv(1) == b""
        except TimeoutError:
            sock.settimeout(TIMEOUT)
            return sock
        except ConnectionResetError:
            closed = True
        sock.close()
        if not closed or time.monotonic() > deadline:
            raise AssertionError(f"a connection from {source} was not held open")


def logged(log: Path, line: str) -> bool:
    """
    Whether nginx logged C{line}, waiting a little for it.
    """
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if line in log.read_text().splitlines():
            return True
        time.sleep(0.05)
    return False


class ProxyProtocolTests(SynchronousTestCase):
    """
    A relay with public ports, an agent writing PROXY headers to nginx.
    """

    skip = missing("nginx", "haproxy")

    def setUp(self) -> None:
        self.public = free_ports(2)
        self.front, self.web, self.web2 = free_ports(3)

    def relay(self, *extra: str) -> None:
        self.stack = Stack(
            Path(self.mktemp()).absolute(),
            relay_extra=("--public-ports", ",".join(map(str, self.public)),
                         "--public-ports-interface", "127.0.0.1",
                         "--proxy-protocol-from", f"{BALANCER}/32", *extra),
        )
        self.addCleanup(self.stack.close)
        self.key = self.stack.key("alice")

    def agent(self, name: str, web: int, public: int, version: str, *extra: str) -> None:
        agent, _ = self.stack.agent(self.key, name, web, "--e2ee", "false", "--public-port",
                                    str(public), "--proxy-protocol", version, *extra)
        agent.wait_for(rf"public port 127\.0\.0\.1:{public} ->")

    def test_eachVersion(self) -> None:
        """
        Straight to the public port, nginx logs the visitor's address, from
        the agent's header of either version.
        """
        self.relay()
        for name, web, public, version, visitor in (
            ("v1", self.web, self.public[0], "v1", "127.0.0.6"),
            ("v2", self.web2, self.public[1], "v2", "127.0.0.7"),
        ):
            log = start_nginx(self.stack, web)
            self.agent(name, web, public, version)
            self.assertIn(b"200 OK", get(public, visitor, f"/{version}"))
            self.assertTrue(logged(log, f"{visitor} GET /{version} HTTP/1.0"), log.read_text())

    def test_behindHaproxy(self) -> None:
        """
        Through haproxy (PROXY v2 from 127.0.0.2, trusted): nginx sees each
        visitor's own address; the per-source limit (one connection) counts
        visitors, not haproxy: a second connection of one visitor is
        refused while another visitor's goes through; the allow list is
        checked against the visitor; a PROXY header sent straight from an
        untrusted source is refused.
        """
        self.relay("--per-source-connections", "1")
        self.stack.relay.wait_for(r"connections from 127\.0\.0\.2/32 start with a PROXY")
        log = start_nginx(self.stack, self.web)
        port = self.public[0]
        self.agent("web", self.web, port, "v1", "--allow-ip", "127.0.0.0/29")
        start_haproxy(self.stack, self.front, port)
        self.assertIn(b"200 OK", get(self.front, "127.0.0.3", "/first"))
        self.assertTrue(logged(log, "127.0.0.3 GET /first HTTP/1.0"), log.read_text())
        held = hold(self.front, "127.0.0.3")
        self.addCleanup(held.close)
        self.assertEqual(get(self.front, "127.0.0.3", "/second"), b"")
        self.assertIn(b"200 OK", get(self.front, "127.0.0.4", "/other"))
        self.assertTrue(logged(log, "127.0.0.4 GET /other HTTP/1.0"), log.read_text())
        self.assertEqual(get(self.front, "127.0.0.9", "/outside"), b"")
        forged = encode(V1, ("198.51.100.7", 1), ("127.0.0.1", port))
        self.assertEqual(get(port, "127.0.0.5", "/forged", prefix=forged), b"")
        self.assertFalse(any("/second" in line or "/outside" in line or "/forged" in line
                             for line in log.read_text().splitlines()))



class TCPShareTests(SynchronousTestCase):
    """
    A TCP share reached with C{tcp-connect}, end to end encrypted: the
    agent ends TLS, then writes the header naming the client's link.
    """

    skip = missing("nginx")

    def test_connector(self) -> None:
        """
        nginx logs the address the relay saw the connector's link come
        from.
        """
        stack = Stack(Path(self.mktemp()).absolute())
        self.addCleanup(stack.close)
        [web] = free_ports(1)
        log = start_nginx(stack, web)
        key = stack.key("alice")
        _, pin = stack.agent(key, "web", web, "--proxy-protocol", "v2")
        assert pin is not None
        _, local = stack.connector(key, "web", web, "--pin", pin)
        self.assertIn(b"200 OK", get(local, "127.0.0.1", "/connector"))
        self.assertTrue(logged(log, "127.0.0.1 GET /connector HTTP/1.0"), log.read_text())


class BalancedRelayTests(SynchronousTestCase):
    """
    haproxy in front of the relay's TLS port, sending PROXY v2: an
    C{inspect} share's service reads the visitor's address in
    C{X-Forwarded-For}, and a C{passthrough} share's nginx, behind an agent
    with C{--proxy-protocol v1}, in its PROXY header.
    """

    skip = missing("haproxy", "nginx", "curl", "openssl")

    def setUp(self) -> None:
        self.stack = Stack(Path(self.mktemp()).absolute(),
                           relay_extra=("--proxy-protocol-from", f"{BALANCER}/32"))
        self.addCleanup(self.stack.close)
        self.key = self.stack.key("alice")
        [self.front] = free_ports(1)
        tls = int(self.stack.address.rsplit(":", 1)[1])
        start_haproxy(self.stack, self.front, tls)

    def via(self, url: str) -> str:
        """
        C{url} on haproxy's port.
        """
        parts = urlsplit(url)
        return parts._replace(netloc=f"{parts.hostname}:{self.front}").geturl()

    def curl(self, url: str, source: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
        host = urlsplit(url).hostname or ""
        return subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--interface", source, "--resolve",
             f"{host}:{self.front}:127.0.0.1", self.via(url), *extra],
            capture_output=True, timeout=TIMEOUT, check=False,
        )

    def test_inspectProxied(self) -> None:
        """
        An inspect share's service (nginx) behind an agent with
        C{--proxy-protocol v1} reads the visitor haproxy named: the relay
        names it in its sessions, the agent in its header; two visitors in
        turn, each named.
        """
        [port] = free_ports(1)
        log = start_nginx(self.stack, port)
        _, url = self.stack.http_agent(self.key, "site", port, "--mode", "inspect",
                                       "--proxy-protocol", "v1")
        ca = str(self.stack.data / "tls" / "share-ca.crt")
        for source, path in (("127.0.0.3", "one"), ("127.0.0.4", "two")):
            done = self.curl(url + path, source, "--cacert", ca)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertTrue(logged(log, f"{source} GET /{path} HTTP/1.1"), log.read_text())

    def test_inspect(self) -> None:
        """
        The relay's HTTP proxy names the visitor haproxy named.
        """
        web = self.stack.web_service()
        _, url = self.stack.http_agent(self.key, "blog", web, "--mode", "inspect")
        ca = str(self.stack.data / "tls" / "share-ca.crt")
        done = self.curl(url + "headers", "127.0.0.3", "--cacert", ca)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("x-forwarded-for: 127.0.0.3", done.stdout.decode().lower())

    def test_passthrough(self) -> None:
        """
        A passthrough share's service (nginx ending TLS itself) reads the
        visitor haproxy named in the agent's PROXY header.
        """
        [port] = free_ports(1)
        root = self.stack.tmp / "tls-nginx"
        root.mkdir()
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-days", "1", "-subj", "/CN=shop.localhost", "-keyout",
             str(root / "key.pem"), "-out", str(root / "cert.pem")],
            check=True, capture_output=True, timeout=TIMEOUT,
        )
        log = start_nginx(self.stack, port, tls=root)
        _, url = self.stack.http_agent(self.key, "shop", port, "--mode", "passthrough",
                                       "--proxy-protocol", "v1")
        done = self.curl(url + "passthrough", "127.0.0.4", "--insecure")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(logged(log, "127.0.0.4 GET /passthrough HTTP/1.1"), log.read_text())

    def test_e2ee(self) -> None:
        """
        An e2ee share's service (nginx, plain HTTP after the header) reads
        the visitor haproxy named; a second visitor's request is not sent on
        the first visitor's connection (the agent gives each visitor
        connection connections of its own), so nginx names each.
        """
        [port] = free_ports(1)
        log = start_nginx(self.stack, port)
        _, url = self.stack.http_agent(self.key, "app", port, "--proxy-protocol", "v2")
        ca = str(self.stack.tmp / "agent-app" / "share-ca.crt")
        for source, path in (("127.0.0.5", "one"), ("127.0.0.6", "two")):
            done = self.curl(url + path, source, "--cacert", ca)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertTrue(logged(log, f"{source} GET /{path} HTTP/1.1"), log.read_text())
