"""
Key exchange on every TLS leg: the hybrid post-quantum group X25519MLKEM768
is offered and chosen wherever the OpenSSL in use has it.  nfltr sets no
group list of its own (pyOpenSSL can only narrow it to one curve), so it
relies on OpenSSL's default order, which puts X25519MLKEM768 first from
OpenSSL 3.5 on; this test fails if a change to the contexts loses that.
"""

from __future__ import annotations

from pathlib import Path

from OpenSSL import SSL
from twisted.trial.unittest import SynchronousTestCase

from nfltr.tls import (
    ShareCA,
    client_creator,
    ensure_relay_pki,
    ensure_self_signed,
    server_context_factory,
)

from .tls_helpers import Pair

HYBRID = "X25519MLKEM768"


def _openssl() -> tuple[int, int]:
    text = SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode().split()[1]
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


class GroupTests(SynchronousTestCase):
    """
    The negotiated group of each kind of leg.
    """

    if _openssl() < (3, 5):
        skip = f"OpenSSL {_openssl()} has no {HYBRID}"

    def assertHybrid(self, pair: Pair) -> None:
        self.assertTrue(pair.client_app.handshook)
        for side in (pair.client, pair.server):
            self.assertEqual(side._tlsConnection.get_group_name(), HYBRID)

    def test_relayLink(self) -> None:
        """
        An agent's or connector's link to the relay (CA-verified).
        """
        tmp = Path(self.mktemp())
        pki = ensure_relay_pki(tmp, [])
        self.assertHybrid(Pair(server_context_factory(pki.cert, pki.key),
                               client_creator("localhost", ca_path=pki.ca_cert)))

    def test_endToEnd(self) -> None:
        """
        The end-to-end leg between a connector and an agent (pinned).
        """
        identity = ensure_self_signed(Path(self.mktemp()), "web")
        self.assertHybrid(Pair(server_context_factory(identity.cert, identity.key),
                               client_creator("web", pin=identity.fingerprint, role="agent")))

    def test_shareCertificate(self) -> None:
        """
        A share's TLS (e2ee at the agent, inspect at the relay), as a client
        that trusts the share CA sees it.
        """
        tmp = Path(self.mktemp())
        pki = ensure_relay_pki(tmp, [], share_domain="localhost")
        ca = ShareCA.load(pki, "localhost")
        self.assertHybrid(Pair(ca.issue("blog"),
                               client_creator("blog.localhost", ca_path=pki.share_ca_cert)))


class OpenSSLConfigurationTests(SynchronousTestCase):
    """
    L{nfltr.tls._openssl_config}: the settings pyOpenSSL cannot make, given to
    OpenSSL as it loads, in a fresh interpreter as each nfltr process is.
    """

    def run_python(self, code: str, **env: str) -> str:
        import os
        import subprocess
        import sys

        environ = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
        # From the tree under test (a -c script imports from its directory).
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**environ, **env}, cwd=Path(__file__).resolve().parent.parent,
                              timeout=60, check=True)
        return done.stdout.strip()

    def test_applied(self) -> None:
        """
        Importing nfltr.tls loads OpenSSL with nfltr's configuration, then takes
        it out of the environment (children do not inherit it); a server
        context then refuses a TLS 1.3 client that offers only secp521r1,
        and sends no session ticket.
        """
        code = """
import os, socket, ssl, threading, tempfile
from pathlib import Path
import nfltr.tls
from OpenSSL import SSL
from nfltr.tls import ensure_self_signed, server_context_factory
ident = ensure_self_signed(Path(tempfile.mkdtemp()), "x")
context = server_context_factory(ident.cert, ident.key).context
server = socket.create_server(("127.0.0.1", 0))
def serve():
    for _ in range(2):
        sock, _ = server.accept()
        conn = SSL.Connection(context, sock)
        conn.set_accept_state()
        try:
            conn.do_handshake(); conn.send(b"hi"); conn.recv(1)
        except SSL.Error:
            pass
        sock.close()
threading.Thread(target=serve, daemon=True).start()
client = ssl.create_default_context()
client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
tls = client.wrap_socket(socket.create_connection(server.getsockname()), server_hostname="x")
tls.recv(2)
ticket = tls.session.has_ticket
tls.close()
p521 = ssl.create_default_context()
p521.check_hostname, p521.verify_mode = False, ssl.CERT_NONE
p521.minimum_version = ssl.TLSVersion.TLSv1_3
p521.set_ecdh_curve("secp521r1")
try:
    p521.wrap_socket(socket.create_connection(server.getsockname()), server_hostname="x")
    refused = False
except ssl.SSLError:
    refused = True
print(nfltr.tls.OPENSSL_CONFIGURED, "OPENSSL_CONF" in os.environ, ticket, refused)
"""
        self.assertEqual(self.run_python(code), "True False False True")

    def test_usersOwn(self) -> None:
        """
        A user's own OPENSSL_CONF is left alone.
        """
        self.assertEqual(
            self.run_python("import nfltr.tls; print(nfltr.tls.OPENSSL_CONFIGURED)",
                            OPENSSL_CONF="/dev/null"),
            "False",
        )
