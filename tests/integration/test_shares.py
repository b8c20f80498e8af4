"""
Share URLs end to end, with real processes: a relay, C{nfltr http} agents,
a web service (L{tests.integration.web_service}), and real HTTP clients
(curl, and the C{websockets} client).  The behaviour tests are written once
(L{ShareBehaviour}) and run for each mode.
"""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import subprocess
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from websockets.sync.client import connect as ws_connect

from .harness import StackTestCase, missing, nfltr
from .web_service import pattern

KIB, MIB = 1024, 1024 * 1024
CURL_TIMEOUT = 120


def make_tls_service_cert(directory: Path, host: str) -> tuple[Path, Path, Path]:
    """
    A CA and a certificate for C{host} signed by it, as a passthrough
    service holds: (CA file, certificate file, key file).
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    caKey = ec.generate_private_key(ec.SECP256R1())
    caName = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "test service CA")])
    ca = (
        x509.CertificateBuilder().subject_name(caName).issuer_name(caName)
        .public_key(caKey.public_key()).serial_number(1)
        .not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
        .sign(caKey, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, host)]))
        .issuer_name(caName).public_key(key.public_key()).serial_number(2)
        .not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), False)
        .sign(caKey, hashes.SHA256())
    )
    paths = directory / "ca.crt", directory / "service.crt", directory / "service.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))
    return paths


class SharePublisher:
    """
    Publishes a share of a test web service.  Mixed into a
    L{StackTestCase} with C{mode} set.
    """

    mode: str
    name = "blog"
    stack: any  # type: ignore[valid-type]

    def publish(self, *service: str, extra: tuple[str, ...] = ()) -> str:
        """
        Start a web service and an agent publishing it (with C{extra}
        options); the share URL.
        """
        self.key = self.stack.key("alice")
        self.ca = str(self.stack.data / "tls" / "share-ca.crt")
        if self.mode == "passthrough":
            host = f"{self.name}.localhost"
            ca, cert, key = make_tls_service_cert(self.stack.tmp / "service-tls", host)
            service = (*service, "--tls", str(cert), str(key))
            self.ca = str(ca)
        port = self.stack.web_service(*service)
        self.agent, url = self.stack.http_agent(self.key, self.name, port, "--mode", self.mode,
                                                *extra)
        self.url = url
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port
        return url

    def curl(self, *args: str, urls: list[str]) -> bytes:
        """
        Run curl against share URLs; the bodies it wrote, concatenated.
        """
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--cacert", self.ca,
             "--resolve", f"{self.host}:{self.port}:127.0.0.1", *args, *urls],
            capture_output=True, timeout=CURL_TIMEOUT, check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"curl failed ({done.returncode}): {done.stderr.decode()}\n"
                                 f"agent:\n{self.agent.output()}")
        return done.stdout


class ShareBehaviour(SharePublisher):
    """
    What every share mode must do.  Mixed into a L{StackTestCase} with
    C{mode} set.
    """

    def test_sizesWithAndWithoutKeepAlive(self) -> None:
        """
        1 KiB and 1 MiB responses arrive whole, three of each over one
        kept-alive connection and three of each on a new connection per
        request.
        """
        url = self.publish()
        urls = [f"{url}bytes/{KIB}", f"{url}bytes/{MIB}"] * 3
        expected = (pattern(KIB) + pattern(MIB)) * 3
        for extra in ((), ("--header", "Connection: close")):
            body = self.curl(*extra, urls=urls)
            self.assertEqual(len(body), len(expected))
            self.assertEqual(hashlib.sha256(body).digest(), hashlib.sha256(expected).digest())

    def test_upload(self) -> None:
        """
        A 1 MiB request body reaches the service whole.
        """
        url = self.publish()
        data = self.stack.tmp / "upload.bin"
        data.write_bytes(pattern(MIB))
        answer = self.curl("--data-binary", f"@{data}", urls=[f"{url}sha256"])
        self.assertEqual(answer.decode(), hashlib.sha256(pattern(MIB)).hexdigest())

    def test_closingService(self) -> None:
        """
        500 requests without keep-alive, from a service that sends each
        response without a length and closes at once: no byte is lost.
        """
        url = self.publish("--close")
        size = 4 * KIB + 17
        body = self.curl("--header", "Connection: close", urls=[f"{url}bytes/{size}"] * 500)
        self.assertEqual(len(body), size * 500)
        self.assertEqual(body, pattern(size) * 500)

    def test_websocket(self) -> None:
        """
        A WebSocket echo works through the share, for small and large
        messages, text and binary.
        """
        url = self.publish()
        context = ssl.create_default_context(cafile=self.ca)
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        with ws_connect(
            f"wss://{self.host}:{self.port}/ws", sock=sock, ssl=context,
            server_hostname=self.host, max_size=4 * MIB, open_timeout=30,
        ) as ws:
            ws.send("hello")
            self.assertEqual(ws.recv(timeout=30), "hello")
            blob = pattern(MIB)
            ws.send(blob)
            self.assertEqual(ws.recv(timeout=30), blob)
        del url


class PolicyBehaviour(ShareBehaviour):
    """
    Share policies, for the modes that read HTTP (e2ee: the agent checks;
    inspect: the relay does).
    """

    def status(self, url: str, *args: str) -> tuple[int, str]:
        """
        The status of a GET of C{url}, and its headers.
        """
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--cacert", self.ca, "--resolve",
             f"{self.host}:{self.port}:127.0.0.1", "--dump-header", "-", "--output",
             "/dev/null", "--write-out", "%{http_code}", *args, url],
            capture_output=True, text=True, timeout=CURL_TIMEOUT, check=True,
        )
        return int(done.stdout[-3:]), done.stdout[:-3]

    def test_credentials(self) -> None:
        """
        With Basic auth and a bearer token: no credentials or wrong ones get
        401 with both challenges; either right one gets the page.
        """
        log = self.stack.tmp / "requests.log"
        url = self.publish("--log", str(log), extra=("--basic-auth", "ann:s3cret", "--bearer",
                                                     "tok-9"))
        page = f"{url}bytes/{KIB}"
        code, head = self.status(f"{url}refused-1")
        self.assertEqual(code, 401)
        self.assertEqual(self.status(f"{url}refused-2", "--user", "ann:wrong")[0], 401)
        self.assertEqual(self.status(f"{url}refused-3", "--oauth2-bearer", "tok-8")[0], 401)
        code, head = self.status(page)
        self.assertEqual(code, 401)
        self.assertIn("www-authenticate: basic realm=\"blog\"", head.lower())
        self.assertIn("www-authenticate: bearer", head.lower())
        self.assertEqual(self.status(page, "--user", "ann:wrong")[0], 401)
        self.assertEqual(self.status(page, "--user", "ann:s3cret")[0], 200)
        self.assertEqual(self.status(page, "--oauth2-bearer", "tok-9")[0], 200)
        self.assertEqual(self.status(page, "--oauth2-bearer", "tok-8")[0], 401)
        self.assertNotIn("s3cret", self.agent.output())
        self.assertNotIn("tok-9", self.agent.output())
        # Refused requests never reached the service; the accepted ones did.
        reached = log.read_text()
        self.assertNotIn("refused", reached)
        self.assertEqual(reached.count(f"GET /bytes/{KIB}"), 2)

    def test_requiredHeaderAndAllowList(self) -> None:
        """
        A required header must be present with its value (403 otherwise);
        an allow list without the visitor's address turns it away before
        any HTTP.
        """
        url = self.publish(extra=("--require-header", "X-Hook: abc"))
        self.assertEqual(self.status(url + "headers")[0], 403)
        self.assertEqual(self.status(url + "headers", "--header", "X-Hook: abc")[0], 200)
        self.agent.stop()
        self.stack.http_agent(self.key, "fenced", self.stack.web_service(), "--mode",
                              self.mode, "--allow-ip", "192.0.2.0/24", "--allow-ip", "::1")
        fenced = subprocess.run(
            ["curl", "--silent", "--cacert", self.ca, "--resolve",
             f"fenced.localhost:{self.port}:127.0.0.1", f"https://fenced.localhost:{self.port}/"],
            capture_output=True, timeout=CURL_TIMEOUT, check=False,
        )
        self.assertNotEqual(fenced.returncode, 0)
        self.assertEqual(fenced.stdout, b"")


class E2EEShareTests(PolicyBehaviour, StackTestCase):
    """
    C{--mode e2ee}: the agent ends the visitor's TLS.
    """

    skip = missing('curl')

    mode = "e2ee"

    def test_agentHoldsTheKey(self) -> None:
        """
        The certificate a visitor is served holds the agent's share key
        (from its state directory), not one of the relay's; the key's bytes
        are nowhere in the relay's data directory.
        """
        self.publish()
        keyFile = self.stack.tmp / f"agent-{self.name}" / "share.key"
        key = serialization.load_pem_private_key(keyFile.read_bytes(), None)
        context = ssl.create_default_context(cafile=self.ca)
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as raw, \
                context.wrap_socket(raw, server_hostname=self.host) as tls:
            served = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
        self.assertEqual(
            served.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo),
            key.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo),
        )
        secret = key.private_numbers().private_value.to_bytes(32, "big")  # type: ignore[union-attr]
        pem = keyFile.read_bytes()
        for path in self.stack.data.rglob("*"):
            if path.is_file():
                content = path.read_bytes()
                self.assertNotIn(secret, content, path)
                self.assertNotIn(pem, content, path)

    def test_idleExpiry(self) -> None:
        """
        With C{--idle-expiry 2s} the share serves while visited, then the
        agent ends by itself, exit status 0, saying why; the URL is gone.
        """
        url = self.publish(extra=("--idle-expiry", "2s"))
        self.assertEqual(self.curl(urls=[f"{url}bytes/{KIB}"]), pattern(KIB))
        self.assertEqual(self.agent.wait_exit(timeout=30), 0, self.agent.output())
        self.assertIn("share expired: no visitor for 2s (--idle-expiry)", self.agent.output())

    def scrape(self) -> str:
        """
        The relay's metrics, from its admin listener.
        """
        admin = self.stack.info["admin"]
        with urllib.request.urlopen(f"http://{admin}/metrics", timeout=30) as response:
            return response.read().decode()

    def test_metrics(self) -> None:
        """
        A scrape during a run counts the share's visitors and shows the
        agent's series; once the agent is gone, no series names it.
        """
        url = self.publish()
        # HTTP/1.1: over HTTP/2 curl would take one connection for the three.
        self.curl("--http1.1", "--header", "Connection: close", urls=[f"{url}bytes/{KIB}"] * 3)
        text = self.scrape()
        self.assertIn('nfltr_sessions_total{kind="share",outcome="routed"} 3.0', text)
        self.assertIn('nfltr_agent_sessions_open{agent="blog"}', text)
        self.assertIn("nfltr_agents_connected 1.0", text)
        self.agent.stop()
        deadline = time.monotonic() + 30
        while 'agent="blog"' in (text := self.scrape()) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertNotIn('agent="blog"', text)
        self.assertIn("nfltr_agents_connected 0.0", text)

    def test_forwardedHeaders(self) -> None:
        """
        The service gets Host rewritten to localhost:PORT, the visitor's
        host in X-Forwarded-Host, and the visitor's address in
        X-Forwarded-For and Forwarded.
        """
        url = self.publish()
        head = self.curl(urls=[f"{url}headers"]).decode().lower()
        self.assertIn("host: localhost:", head)
        self.assertIn(f"x-forwarded-host: {self.host}:{self.port}", head)
        self.assertIn("x-forwarded-for: 127.0.0.1", head)
        self.assertIn("forwarded: for=127.0.0.1", head)


    def test_plainHTTP(self) -> None:
        """
        With C{--plain-http true} the relay's HTTP port serves the share in
        plain HTTP (visitor headers added by the relay); without it, the HTTP
        port redirects to the HTTPS URL.
        """
        url = self.publish(extra=("--plain-http", "true"))
        plain = self.agent.wait_for(r"share (http://\S+) ").group(1)
        httpPort = int(self.stack.info["http"].rsplit(":", 1)[1])
        self.assertEqual(plain, f"http://{self.host}:{httpPort}/")
        body = self.curl("--resolve", f"{self.host}:{httpPort}:127.0.0.1",
                         urls=[f"{plain}bytes/{KIB}", f"{plain}headers"])
        self.assertTrue(body.startswith(pattern(KIB)))
        self.assertIn(b"X-Forwarded-For: 127.0.0.1", body)
        redirect = subprocess.run(
            ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
             f"http://other.localhost:{httpPort}/x"],
            capture_output=True, text=True, timeout=CURL_TIMEOUT, check=True,
        ).stdout
        self.assertEqual(redirect, f"308 https://other.localhost:{self.port}/x")
        del url


class InspectShareTests(PolicyBehaviour, StackTestCase):
    """
    C{--mode inspect}: the relay ends TLS and proxies HTTP.
    """

    skip = missing('curl')

    mode = "inspect"

    def test_forwardedHeaders(self) -> None:
        """
        The relay adds the visitor's address, the agent rewrites Host; the
        agent adds no second X-Forwarded-For (it trusts the relay's).
        """
        url = self.publish()
        head = self.curl(urls=[f"{url}headers"]).decode().lower()
        self.assertIn("host: localhost:", head)
        self.assertEqual(head.count("x-forwarded-for: 127.0.0.1\r\n"), 1)
        self.assertIn("forwarded: for=127.0.0.1", head)


class PassthroughShareTests(ShareBehaviour, StackTestCase):
    """
    C{--mode passthrough}: the service ends TLS with its own certificate.
    """

    skip = missing('curl')

    mode = "passthrough"

    def test_credentialsRefused(self) -> None:
        """
        Credentials on a passthrough share are refused at start, saying why.
        """
        done = subprocess.run(
            nfltr("http", "443", "--mode", "passthrough", "--basic-auth", "a:b",
                  *self.stack.relay_args()),
            capture_output=True, text=True, timeout=CURL_TIMEOUT, check=False,
            env={**os.environ, "NFLTR_KEY": "x"},
        )
        self.assertEqual(done.returncode, 2)
        self.assertIn("in passthrough only the service does", done.stderr)

    def test_serviceCertificate(self) -> None:
        """
        The visitor is served the service's own certificate.
        """
        self.publish()
        context = ssl.create_default_context(cafile=self.ca)
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as raw, \
                context.wrap_socket(raw, server_hostname=self.host) as tls:
            served = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
        issuer = served.issuer.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
        self.assertEqual(issuer, "test service CA")


class LeaseTests(StackTestCase):
    """
    Share names are leased to their account.
    """

    def test_nameOfAnotherAccount(self) -> None:
        """
        While alice's agent publishes C{blog}, and after it stopped, bob's
        agent asking for C{blog} exits 1 with a message saying the name is
        in use; alice's restarted agent gets it back.
        """
        alice, bob = self.stack.key("alice"), self.stack.key("bob")
        port = self.stack.web_service()
        first, url = self.stack.http_agent(alice, "blog", port)
        for _ in range(2):
            other = self.stack.start(
                nfltr("http", str(port), "--name", "blog", "--state-dir",
                      str(self.stack.tmp / "bob"), *self.stack.relay_args()),
                "bob's agent", {"NFLTR_KEY": bob},
            )
            self.assertEqual(other.wait_exit(), 1, other.output())
            self.assertIn("name blog is leased to another account", other.output())
            first.stop()
        _, again = self.stack.http_agent(alice, "blog", port)
        self.assertEqual(again, url)
