"""
Tests for L{nfltr.tls._shares}: the share CA signs agents' requests for
their share name only, refuses what it must, and is name-constrained to the
share domain.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from twisted.trial.unittest import SynchronousTestCase

from nfltr.tls import (
    SHARE_CERT_LIFETIME,
    PKIError,
    ShareCA,
    ShareCertError,
    ensure_relay_pki,
    load_share_key,
    server_tls_from_pem,
    share_request,
)


def _names(cert: x509.Certificate) -> list[str]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return ext.get_values_for_type(x509.DNSName)


class ShareCATests(SynchronousTestCase):
    """
    L{ShareCA} on a real relay PKI.
    """

    def setUp(self) -> None:
        self.dir = Path(self.mktemp())
        self.pki = ensure_relay_pki(self.dir, [], share_domain="localhost")
        self.ca = ShareCA.load(self.pki, "localhost")
        self.key = ec.generate_private_key(ec.SECP256R1())

    def test_signsForTheShareNameOnly(self) -> None:
        """
        Whatever names the request asks for, the certificate names
        C{NAME.DOMAIN} only, carries the request's key, is signed by the share
        CA, lives L{SHARE_CERT_LIFETIME}, and comes with the CA after it.
        """
        request = (
            x509.CertificateSigningRequestBuilder()
            .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "x")]))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("bank.example")]), False)
            .sign(self.key, hashes.SHA256())
            .public_bytes(serialization.Encoding.PEM).decode()
        )
        now = datetime(2026, 1, 1, tzinfo=UTC)
        chain = x509.load_pem_x509_certificates(self.ca.sign(request, "blog", now).encode())
        leaf, ca = chain
        self.assertEqual(_names(leaf), ["blog.localhost"])
        self.assertEqual(ca, self.ca.cert)
        leaf.verify_directly_issued_by(ca)
        self.assertEqual(
            leaf.public_key().public_numbers(), self.key.public_key().public_numbers()
        )
        self.assertEqual(leaf.not_valid_after_utc - now, SHARE_CERT_LIFETIME)

    def test_agentServesTheChain(self) -> None:
        """
        The agent's side: its request signed, the chain loads with its key.
        """
        chain = self.ca.sign(share_request(self.key, "blog"), "blog")
        server_tls_from_pem(self.key, chain)

    def test_chainOfAnotherKey(self) -> None:
        """
        A chain for another key is refused with L{PKIError}.
        """
        chain = self.ca.sign(share_request(self.key, "blog"), "blog")
        other = ec.generate_private_key(ec.SECP256R1())
        self.assertRaises(PKIError, server_tls_from_pem, other, chain)

    def test_badRequests(self) -> None:
        """
        Unreadable, oversized, badly signed, weak or unsupported requests are
        refused with L{ShareCertError}.
        """
        good = share_request(self.key, "blog")
        tampered = x509.load_pem_x509_csr(good.encode())
        # Re-sign the body under one key, then swap in another key's signature.
        forged = good.replace(good.splitlines()[3], good.splitlines()[3][::-1])
        weak = rsa.generate_private_key(65537, 1024)
        weakRequest = (
            x509.CertificateSigningRequestBuilder()
            .subject_name(tampered.subject)
            .sign(weak, hashes.SHA256())
            .public_bytes(serialization.Encoding.PEM).decode()
        )
        edKey = ed25519.Ed25519PrivateKey.generate()
        edRequest = (
            x509.CertificateSigningRequestBuilder()
            .subject_name(tampered.subject)
            .sign(edKey, None)
            .public_bytes(serialization.Encoding.PEM).decode()
        )
        for bad in ("nonsense", "x" * 10000, forged, weakRequest, edRequest):
            self.assertRaises(ShareCertError, self.ca.sign, bad, "blog")

    def test_inspectCertificate(self) -> None:
        """
        L{ShareCA.issue} makes a usable server context in memory and writes
        nothing to the data directory.
        """
        before = sorted(p.name for p in (self.dir / "tls").iterdir())
        self.ca.issue("shop")
        self.assertEqual(sorted(p.name for p in (self.dir / "tls").iterdir()), before)

    def test_nameConstrained(self) -> None:
        """
        The share CA permits names under the share domain only; changing the
        domain re-issues it with the same key.
        """
        constraint = self.ca.cert.extensions.get_extension_for_class(x509.NameConstraints)
        self.assertTrue(constraint.critical)
        self.assertEqual(constraint.value.permitted_subtrees, [x509.DNSName("localhost")])
        pki = ensure_relay_pki(self.dir, [], share_domain="tunnels.example.com")
        moved = ShareCA.load(pki, "tunnels.example.com")
        self.assertEqual(
            moved.cert.extensions.get_extension_for_class(x509.NameConstraints)
            .value.permitted_subtrees,
            [x509.DNSName("tunnels.example.com")],
        )
        self.assertEqual(
            moved.key.private_numbers(), self.ca.key.private_numbers()
        )

    def test_shareKeyKept(self) -> None:
        """
        The agent's share key is made once and read back the same.
        """
        path = Path(self.mktemp())
        path.mkdir()
        first = load_share_key(path / "share.key")
        second = load_share_key(path / "share.key")
        self.assertEqual(first.private_numbers(), second.private_numbers())
        self.assertEqual((path / "share.key").stat().st_mode & 0o777, 0o600)
