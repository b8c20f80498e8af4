"""
Tests for L{nfltr.relay.certs}: the relay's own certificate, the operator's
option, and its reload.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.certs import RelayCertificate
from nfltr.tls import client_creator, ensure_self_signed, peer_fingerprint, spki_fingerprint

from ..tls_helpers import Pair


def self_signed(directory: Path, names: list[str]) -> tuple[Path, Path]:
    """
    A key and a self-signed certificate naming C{names}, written to
    C{directory}.
    """
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, names[0])])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .sign(key, hashes.SHA256())
    )
    certPath, keyPath = directory / "cert.pem", directory / "key.pem"
    certPath.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyPath.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))
    return certPath, keyPath


def served(certificate: RelayCertificate, pin: str) -> str:
    """
    The fingerprint a client is served by C{certificate}'s connection
    creator now (the client pins C{pin}).
    """
    pair = Pair(certificate.tls, client_creator("relay.example.com", pin=pin))
    return peer_fingerprint(pair.client) if pair.client_app.handshook else "no handshake"


class ReloadTests(SynchronousTestCase):
    """
    L{RelayCertificate.reload}.
    """

    def setUp(self) -> None:
        tmp = Path(self.mktemp())
        self.first = self_signed(tmp / "first", ["relay.example.com", "*.tunnels.example.com"])
        self.second = self_signed(tmp / "second", ["relay.example.com"])
        self.live = tmp / "live"
        self.live.mkdir()
        self.install(self.first)
        self.logged: list[dict[str, object]] = []
        RelayCertificate.log = Logger(observer=self.logged.append)
        self.addCleanup(setattr, RelayCertificate, "log", Logger())

    def install(self, files: tuple[Path, Path]) -> None:
        shutil.copy(files[0], self.live / "cert.pem")
        shutil.copy(files[1], self.live / "key.pem")

    def fingerprint(self, files: tuple[Path, Path]) -> str:
        return spki_fingerprint(x509.load_pem_x509_certificate(files[0].read_bytes()))

    def test_reloadSwapsForNewConnections(self) -> None:
        """
        After the files change and a reload, the same connection creator
        serves the new certificate; its fingerprint and names follow.
        """
        certificate = RelayCertificate(self.live / "cert.pem", self.live / "key.pem")
        tls = certificate.tls
        first, second = self.fingerprint(self.first), self.fingerprint(self.second)
        self.assertEqual(served(certificate, first), first)
        self.install(self.second)
        self.assertTrue(certificate.reload())
        self.assertIs(certificate.tls, tls)
        self.assertEqual(certificate.fingerprint, second)
        self.assertEqual(served(certificate, second), second)
        self.assertFalse(certificate.covers("blog.tunnels.example.com"))

    def test_failedReloadKeepsTheOld(self) -> None:
        """
        A certificate that does not match its key is refused on reload: the
        old one is still served, and the error is logged.
        """
        certificate = RelayCertificate(self.live / "cert.pem", self.live / "key.pem")
        shutil.copy(self.second[0], self.live / "cert.pem")
        self.assertFalse(certificate.reload())
        first = self.fingerprint(self.first)
        self.assertEqual(certificate.fingerprint, first)
        self.assertEqual(served(certificate, first), first)
        self.assertIn("certificate reload failed", str(self.logged[-1]["log_format"]))

    def test_covers(self) -> None:
        """
        Exact names and one wildcard label are covered; deeper names and the
        bare parent are not.
        """
        certificate = RelayCertificate(self.live / "cert.pem", self.live / "key.pem")
        self.assertTrue(certificate.covers("relay.example.com"))
        self.assertTrue(certificate.covers("Blog.Tunnels.Example.com"))
        self.assertFalse(certificate.covers("a.blog.tunnels.example.com"))
        self.assertFalse(certificate.covers("tunnels.example.com"))

    def test_relayMade(self) -> None:
        """
        The relay's own made certificate works the same way.
        """
        identity = ensure_self_signed(Path(self.mktemp()), "relay")
        certificate = RelayCertificate(identity.cert, identity.key)
        self.assertEqual(certificate.fingerprint, identity.fingerprint)
