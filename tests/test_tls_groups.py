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
