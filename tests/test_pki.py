# -*- test-case-name: tests.test_pki -*-
"""
Tests for L{nfltr.tls}: the relay's and agents' certificates, the
fingerprint format, and real TLS handshakes in memory.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import given
from hypothesis import strategies as st
from OpenSSL import SSL
from twisted.trial import unittest

from nfltr.tls import (
    CertificateRejected,
    InvalidFingerprint,
    PinMismatch,
    PKIError,
    RelayPKI,
    TLSConfigError,
    VerificationFailed,
    client_creator,
    ensure_relay_pki,
    ensure_self_signed,
    parse_fingerprint,
    peer_fingerprint,
    server_context_factory,
    spki_fingerprint,
)
from tests.tls_helpers import Pair

NOW = datetime(2030, 1, 1, tzinfo=UTC)
NAMES = ["relay.example.com", "203.0.113.5"]


def load(path: Path) -> x509.Certificate:
    """
    Load a PEM certificate.
    """
    return x509.load_pem_x509_certificate(path.read_bytes())


def alt_names(cert: x509.Certificate) -> list[str]:
    """
    The subjectAltNames of C{cert} as text.
    """
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(name.value) for name in san]


def mode(path: Path) -> int:
    """
    The permission bits of C{path}.
    """
    return stat.S_IMODE(path.stat().st_mode)


class RelayPKITests(unittest.SynchronousTestCase):
    """
    L{ensure_relay_pki}.
    """

    def setUp(self) -> None:
        self.data = Path(self.mktemp())
        old = os.umask(0)
        try:
            self.pki = ensure_relay_pki(self.data, NAMES, now=NOW)
        finally:
            os.umask(old)

    def files(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in (self.data / "tls").iterdir()}

    def test_files(self) -> None:
        """
        The first call writes the CA, relay and share CA keys 0600 and their
        certificates 0644 into a 0700 directory, even under umask 0, and
        leaves no temporary file behind.
        """
        pki = self.pki
        for key in (pki.ca_key, pki.key, pki.share_ca_key):
            self.assertEqual(mode(key), 0o600, key)
            self.assertIn(b"PRIVATE KEY", key.read_bytes())
        for cert in (pki.ca_cert, pki.cert, pki.share_ca_cert):
            self.assertEqual(mode(cert), 0o644, cert)
        self.assertEqual(mode(self.data / "tls"), 0o700)
        self.assertEqual(sorted(n for n in self.files() if n.endswith(".tmp")), [])
        self.assertEqual(pki.fingerprint, spki_fingerprint(load(pki.cert)))
        self.assertEqual(pki.ca_fingerprint, spki_fingerprint(load(pki.ca_cert)))

    def test_reused(self) -> None:
        """
        A second call changes no file and returns the same fingerprint.
        """
        before = self.files()
        again = ensure_relay_pki(self.data, NAMES, now=NOW + timedelta(days=1))
        self.assertEqual(again, self.pki)
        self.assertEqual(self.files(), before)

    def test_alt_names(self) -> None:
        """
        The relay certificate names every given name, then C{localhost},
        C{127.0.0.1} and C{::1}, IP literals as IP addresses, each once.
        """
        cert = load(self.pki.cert)
        self.assertEqual(
            alt_names(cert), ["relay.example.com", "203.0.113.5", "localhost", "127.0.0.1", "::1"]
        )
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        self.assertEqual(
            san.get_values_for_type(x509.IPAddress),
            [
                ipaddress.ip_address("203.0.113.5"),
                ipaddress.ip_address("127.0.0.1"),
                ipaddress.ip_address("::1"),
            ],
        )
        other = ensure_relay_pki(self.mktemp(), ["localhost", "Relay.Example.COM."], now=NOW)
        self.assertEqual(
            alt_names(load(other.cert)), ["localhost", "relay.example.com", "127.0.0.1", "::1"]
        )

    def test_chain(self) -> None:
        """
        The relay certificate is a 1-year server certificate signed by the
        relay CA, a 10-year P-256 CA; the share CA is another CA, with a key
        of its own.
        """
        ca, cert, share = load(self.pki.ca_cert), load(self.pki.cert), load(self.pki.share_ca_cert)
        cert.verify_directly_issued_by(ca)
        ca.verify_directly_issued_by(ca)
        share.verify_directly_issued_by(share)
        for authority in (ca, share):
            constraints = authority.extensions.get_extension_for_class(x509.BasicConstraints)
            self.assertTrue(constraints.value.ca)
            self.assertEqual(authority.not_valid_after_utc, NOW + timedelta(days=3650))
            self.assertEqual(authority.public_key().curve.name, "secp256r1")  # type: ignore[union-attr]
        leaf = cert.extensions.get_extension_for_class(x509.BasicConstraints)
        self.assertFalse(leaf.value.ca)
        self.assertEqual(cert.not_valid_after_utc, NOW + timedelta(days=365))
        self.assertLessEqual(cert.not_valid_before_utc, NOW)
        self.assertNotEqual(spki_fingerprint(share), self.pki.ca_fingerprint)
        self.assertNotEqual(share.subject, ca.subject)

    def test_new_name(self) -> None:
        """
        Adding a name re-issues the relay certificate for the same key (same
        fingerprint) and leaves the CAs alone.
        """
        before = self.files()
        again = ensure_relay_pki(self.data, [*NAMES, "relay2.example.com"], now=NOW)
        after = self.files()
        self.assertIn("relay2.example.com", alt_names(load(again.cert)))
        self.assertEqual(again.fingerprint, self.pki.fingerprint)
        self.assertNotEqual(after["relay.crt"], before["relay.crt"])
        for name in ("relay.key", "ca.key", "ca.crt", "share-ca.key", "share-ca.crt"):
            self.assertEqual(after[name], before[name], name)

    def test_renewal(self) -> None:
        """
        Within 30 days of its end, the relay certificate is re-issued for the
        same key; the CA is not.
        """
        later = NOW + timedelta(days=340)
        before = self.files()
        again = ensure_relay_pki(self.data, NAMES, now=later)
        self.assertEqual(again.fingerprint, self.pki.fingerprint)
        self.assertEqual(load(again.cert).not_valid_after_utc, later + timedelta(days=365))
        self.assertEqual(self.files()["ca.crt"], before["ca.crt"])

    def test_lost_ca(self) -> None:
        """
        If the CA key is gone, a new CA is made and the relay certificate is
        re-issued under it, keeping the relay key.
        """
        old_ca = self.pki.ca_fingerprint
        self.pki.ca_key.unlink()
        again = ensure_relay_pki(self.data, NAMES, now=NOW)
        self.assertNotEqual(again.ca_fingerprint, old_ca)
        self.assertEqual(again.fingerprint, self.pki.fingerprint)
        load(again.cert).verify_directly_issued_by(load(again.ca_cert))

    def test_corrupt_key(self) -> None:
        """
        An unreadable key is an error naming the file, and is not replaced
        (that would silently change the relay's fingerprint).
        """
        self.pki.key.write_bytes(b"not a key")
        error = self.assertRaises(PKIError, ensure_relay_pki, self.data, NAMES, now=NOW)
        self.assertIn(str(self.pki.key), str(error))
        self.assertEqual(self.pki.key.read_bytes(), b"not a key")

    def test_invalid_name(self) -> None:
        """
        A name that is neither a DNS name nor an IP address is refused.
        """
        for bad in ["", "bad name", "a..b", "-x.example", "x" * 64 + ".example"]:
            self.assertRaises(PKIError, ensure_relay_pki, self.mktemp(), [bad], now=NOW)


class SelfSignedTests(unittest.SynchronousTestCase):
    """
    L{ensure_self_signed}.
    """

    def test_create_and_reuse(self) -> None:
        """
        The agent's key is written 0600 with a self-signed P-256 certificate;
        a second call reuses both and returns the same fingerprint.
        """
        state = Path(self.mktemp())
        first = ensure_self_signed(state, "agent-1", now=NOW)
        self.assertEqual(mode(first.key), 0o600)
        cert = load(first.cert)
        cert.verify_directly_issued_by(cert)
        self.assertEqual(first.fingerprint, spki_fingerprint(cert))
        before = first.cert.read_bytes(), first.key.read_bytes()
        second = ensure_self_signed(state, "agent-1", now=NOW)
        self.assertEqual(second, first)
        self.assertEqual((first.cert.read_bytes(), first.key.read_bytes()), before)

    def test_rename_keeps_pin(self) -> None:
        """
        A new common name re-issues the certificate for the same key: the
        fingerprint clients pinned stays valid.
        """
        state = Path(self.mktemp())
        first = ensure_self_signed(state, "agent-1", now=NOW)
        old = first.cert.read_bytes()
        second = ensure_self_signed(state, "agent-2", now=NOW)
        self.assertNotEqual(second.cert.read_bytes(), old)
        self.assertEqual(second.fingerprint, first.fingerprint)
        names = load(second.cert).subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
        self.assertEqual([n.value for n in names], ["agent-2"])


class FingerprintTests(unittest.SynchronousTestCase):
    """
    L{spki_fingerprint} and L{parse_fingerprint}.
    """

    def test_spki(self) -> None:
        """
        The fingerprint is C{sha256:} and the lowercase hex SHA-256 of the
        certificate's SubjectPublicKeyInfo, for C{cryptography} and pyOpenSSL
        certificates alike.
        """
        identity = ensure_self_signed(self.mktemp(), "x", now=NOW)
        cert = load(identity.cert)
        der = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
        expected = "sha256:" + hashlib.sha256(der).hexdigest()
        self.assertEqual(spki_fingerprint(cert), expected)
        from OpenSSL import crypto

        self.assertEqual(spki_fingerprint(crypto.X509.from_cryptography(cert)), expected)
        self.assertNotEqual(
            expected, "sha256:" + hashlib.sha256(cert.public_bytes(Encoding.DER)).hexdigest()
        )

    @given(st.binary(min_size=32, max_size=32), st.booleans(), st.booleans(), st.booleans())
    def test_forms(self, digest: bytes, upper: bool, colons: bool, prefix: bool) -> None:
        """
        Upper or lower case, with or without colons between bytes, with or
        without the prefix: every form reads back as the canonical one.
        """
        canonical = "sha256:" + digest.hex()
        body = digest.hex(":") if colons else digest.hex()
        text = ("sha256:" if prefix else "") + (body.upper() if upper else body)
        self.assertEqual(parse_fingerprint(text), canonical)
        self.assertEqual(parse_fingerprint(canonical), canonical)

    def test_surrounding_space(self) -> None:
        """
        Whitespace around a pasted fingerprint and an upper-case prefix are
        accepted.
        """
        digest = "ab" * 32
        self.assertEqual(parse_fingerprint(f"  SHA256:{digest}\n"), f"sha256:{digest}")

    def test_invalid(self) -> None:
        """
        Anything else raises L{InvalidFingerprint} (a L{ValueError}) whose
        message quotes the input and states the expected form.
        """
        hex64 = "ab" * 32
        bad = [
            "",
            "sha256:",
            hex64[:-1],
            hex64 + "a",
            "g" + hex64[1:],
            "sha1:" + hex64,
            "md5:" + hex64,
            "sha256:" + hex64[:2] + ":" + hex64[2:],
            "sha256::" + hex64,
            ":".join(hex64[i : i + 4] for i in range(0, 64, 4)),
            "sha256: " + hex64,
            "ab:" * 31 + "ab:",
        ]
        for text in bad:
            error = self.assertRaises(InvalidFingerprint, parse_fingerprint, text)
            self.assertIsInstance(error, ValueError)
            self.assertIn(repr(text), str(error))
            self.assertIn("64 hex digits", str(error))
        self.assertRaises(InvalidFingerprint, parse_fingerprint, None)


class HandshakeTests(unittest.SynchronousTestCase):
    """
    L{server_context_factory} and L{client_creator} in real handshakes.
    """

    def setUp(self) -> None:
        # OpenSSL checks dates against the wall clock: issue for now.
        self.pki: RelayPKI = ensure_relay_pki(self.mktemp(), NAMES)
        self.server = server_context_factory(self.pki.cert, self.pki.key)

    def assertConnected(self, pair: Pair) -> None:
        """
        The handshake completed and data written afterwards arrives, both
        ways.
        """
        self.assertTrue(pair.client_app.handshook)
        self.assertTrue(pair.server_app.handshook)
        pair.client.write(b"hello relay")
        pair.server.write(b"hello agent")
        pair.pump.flush()
        self.assertEqual(pair.server_app.received, b"hello relay")
        self.assertEqual(pair.client_app.received, b"hello agent")
        self.assertIsNone(pair.client_app.lost)

    def assertRefused(self, pair: Pair, kind: type[Exception]) -> Exception:
        """
        The client refused the server: no handshake, no data, both ends
        closed, and the client application learns why.
        """
        self.assertFalse(pair.client_app.handshook)
        self.assertEqual(pair.server_app.received + pair.client_app.received, b"")
        lost = pair.client_app.lost
        assert lost is not None
        self.assertIsNotNone(pair.server_app.lost)
        self.assertTrue(lost.check(kind), lost)
        return lost.value  # type: ignore[return-value]

    def test_ca_localhost(self) -> None:
        """
        With the CA, a client verifying C{localhost} connects, and sees the
        relay's fingerprint.
        """
        pair = Pair(self.server, client_creator("localhost", ca_path=self.pki.ca_cert))
        self.assertConnected(pair)
        self.assertEqual(peer_fingerprint(pair.client), self.pki.fingerprint)
        self.assertIsNone(peer_fingerprint(pair.server))

    def test_ca_names(self) -> None:
        """
        Every name of the certificate verifies, IP addresses included.
        """
        for name in ["relay.example.com", "203.0.113.5", "127.0.0.1", "::1"]:
            pair = Pair(self.server, client_creator(name, ca_path=self.pki.ca_cert))
            self.assertConnected(pair)

    def test_sni(self) -> None:
        """
        The client sends a DNS host name as the server name, and no IP
        address.
        """
        pair = Pair(self.server, client_creator("relay.example.com", ca_path=self.pki.ca_cert))
        self.assertEqual(pair.server.getHandle().get_servername(), b"relay.example.com")
        pair = Pair(self.server, client_creator("127.0.0.1", ca_path=self.pki.ca_cert))
        self.assertIsNone(pair.server.getHandle().get_servername())

    def test_ca_wrong_host(self) -> None:
        """
        A certificate that does not name the host is refused, with a reason
        that names the host and the certificate's names.
        """
        pair = Pair(self.server, client_creator("evil.example.com", ca_path=self.pki.ca_cert))
        error = self.assertRefused(pair, CertificateRejected)
        self.assertIn("'evil.example.com'", str(error))
        self.assertIn("relay.example.com", str(error))
        pair = Pair(self.server, client_creator("198.51.100.1", ca_path=self.pki.ca_cert))
        self.assertRefused(pair, CertificateRejected)

    def test_ca_untrusted(self) -> None:
        """
        A certificate from another relay's CA is refused as untrusted.
        """
        other = ensure_relay_pki(self.mktemp(), NAMES)
        pair = Pair(self.server, client_creator("localhost", ca_path=other.ca_cert))
        error = self.assertRefused(pair, CertificateRejected)
        self.assertIn("not trusted", str(error))

    def test_pin(self) -> None:
        """
        A pin on the relay key's fingerprint connects without the CA, in any
        form the fingerprint was typed.
        """
        pin = self.pki.fingerprint.removeprefix("sha256:").upper()
        pair = Pair(self.server, client_creator("localhost", pin=pin))
        self.assertConnected(pair)

    def test_pin_with_chain(self) -> None:
        """
        A pin judges the leaf alone: a server that sends its CA after its
        certificate is accepted by the leaf's pin, and refused by the CA's.
        """
        chain = Path(self.mktemp())
        chain.write_bytes(self.pki.cert.read_bytes() + self.pki.ca_cert.read_bytes())
        server = server_context_factory(chain, self.pki.key)
        pair = Pair(server, client_creator("localhost", pin=self.pki.fingerprint))
        self.assertConnected(pair)
        self.assertEqual(len(pair.client.getHandle().get_peer_cert_chain()), 2)
        pair = Pair(server, client_creator("localhost", pin=self.pki.ca_fingerprint))
        self.assertRefused(pair, PinMismatch)

    def test_pin_self_signed(self) -> None:
        """
        A pin accepts an agent's self-signed certificate, whatever host name
        the client uses.
        """
        agent = ensure_self_signed(self.mktemp(), "agent-1")
        server = server_context_factory(agent.cert, agent.key)
        pair = Pair(server, client_creator("not-in-cert.example", pin=agent.fingerprint))
        self.assertConnected(pair)
        self.assertEqual(peer_fingerprint(pair.client), agent.fingerprint)

    def test_pin_mismatch(self) -> None:
        """
        A wrong pin is refused with a reason giving both fingerprints.
        """
        wrong = "sha256:" + "00" * 32
        pair = Pair(self.server, client_creator("localhost", pin=wrong))
        error = self.assertRefused(pair, PinMismatch)
        self.assertEqual(
            str(error),
            f"relay certificate fingerprint {self.pki.fingerprint} does not match --pin {wrong}",
        )
        assert isinstance(error, PinMismatch)
        self.assertEqual((error.actual, error.expected), (self.pki.fingerprint, wrong))

    def test_pin_is_leaf(self) -> None:
        """
        Pinning the CA's fingerprint does not accept a certificate it signed:
        the pin names the leaf's key.
        """
        pair = Pair(
            self.server, client_creator("localhost", pin=self.pki.ca_fingerprint, role="agent")
        )
        error = self.assertRefused(pair, PinMismatch)
        self.assertTrue(str(error).startswith("agent certificate fingerprint"))

    def test_check_raises(self) -> None:
        """
        An unexpected exception while checking the certificate does not
        escape into OpenSSL: the connection is refused and the application
        learns why.
        """
        client = client_creator("localhost", ca_path=self.pki.ca_cert)

        def broken(*args: object) -> None:
            raise RuntimeError("boom")

        self.patch(client, "check", broken)
        error = self.assertRefused(Pair(self.server, client), VerificationFailed)
        self.assertIn("could not be checked", str(error))
        self.assertIn("boom", str(error))

    def test_aes_gcm_preferred(self) -> None:
        """
        The server picks AES-GCM even when the client would rather have
        ChaCha20, in TLS 1.3 and in TLS 1.2.
        """
        client = client_creator("localhost", ca_path=self.pki.ca_cert)
        client.context.set_tls13_ciphersuites(
            b"TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"
        )
        pair = Pair(self.server, client)
        self.assertConnected(pair)
        handle = pair.client.getHandle()
        self.assertEqual(handle.get_protocol_version_name(), "TLSv1.3")
        self.assertEqual(handle.get_cipher_name(), "TLS_AES_128_GCM_SHA256")

        client = client_creator("localhost", ca_path=self.pki.ca_cert)
        client.context.set_max_proto_version(SSL.TLS1_2_VERSION)
        client.context.set_cipher_list(
            b"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES256-GCM-SHA384"
        )
        pair = Pair(self.server, client)
        self.assertConnected(pair)
        handle = pair.client.getHandle()
        self.assertEqual(handle.get_protocol_version_name(), "TLSv1.2")
        self.assertEqual(handle.get_cipher_name(), "ECDHE-ECDSA-AES256-GCM-SHA384")

    def test_options(self) -> None:
        """
        Compression, renegotiation and session tickets are off on both
        sides.
        """
        client = client_creator("localhost", ca_path=self.pki.ca_cert)
        wanted = SSL.OP_NO_COMPRESSION | SSL.OP_NO_RENEGOTIATION | SSL.OP_NO_TICKET
        for context in (self.server.context, client.context):
            self.assertEqual(context.set_options(0) & wanted, wanted)


class CreatorArgumentTests(unittest.SynchronousTestCase):
    """
    Arguments of L{client_creator} and L{server_context_factory}.
    """

    def setUp(self) -> None:
        self.pki = ensure_relay_pki(self.mktemp(), ["localhost"], now=NOW)

    def test_exactly_one(self) -> None:
        """
        Neither or both of C{ca_path} and C{pin} raise L{TLSConfigError}.
        """
        self.assertRaises(TLSConfigError, client_creator, "localhost")
        self.assertRaises(
            TLSConfigError, client_creator, "localhost", self.pki.ca_cert, self.pki.fingerprint
        )

    def test_bad_pin(self) -> None:
        """
        A malformed pin raises L{InvalidFingerprint}.
        """
        self.assertRaises(InvalidFingerprint, client_creator, "localhost", pin="sha256:abc")

    def test_missing_ca(self) -> None:
        """
        A CA file that cannot be loaded raises L{PKIError}.
        """
        self.assertRaises(PKIError, client_creator, "localhost", ca_path=self.mktemp())

    def test_mismatched_key(self) -> None:
        """
        A certificate and a key that do not belong together raise
        L{PKIError} naming both files.
        """
        error = self.assertRaises(PKIError, server_context_factory, self.pki.cert, self.pki.ca_key)
        self.assertIn(str(self.pki.ca_key), str(error))
        self.assertRaises(PKIError, server_context_factory, self.mktemp(), self.pki.key)
