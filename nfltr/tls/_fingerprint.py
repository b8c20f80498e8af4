# -*- test-case-name: tests.test_pki -*-
"""
The one certificate fingerprint format of nfltr.

A fingerprint is C{sha256:} followed by the lowercase hex SHA-256 of the
certificate's SubjectPublicKeyInfo (DER).  It names the key, not the
certificate: a certificate re-issued for the same key keeps its pin.
"""

from __future__ import annotations

import hashlib
import re
from typing import Protocol

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from OpenSSL import crypto

PREFIX = "sha256:"
_HEX = re.compile(r"[0-9a-f]{64}")
_HEX_WITH_COLONS = re.compile(r"[0-9a-f]{2}(?::[0-9a-f]{2}){31}")


class _PeerCertificateHolder(Protocol):
    """
    What L{peer_fingerprint} needs of a transport: C{ISSLTransport}'s
    C{getPeerCertificate}.
    """

    def getPeerCertificate(self) -> crypto.X509 | None: ...


class InvalidFingerprint(ValueError):
    """
    A text given as a fingerprint (say, to C{--pin}) is not one.
    """

    def __init__(self, text: str) -> None:
        super().__init__(
            f"invalid fingerprint {text!r}: expected 'sha256:' followed by 64 hex digits, "
            "optionally with ':' between bytes (the relay and 'nfltr tcp' print it)"
        )
        self.text = text


def public_key_fingerprint(key: PublicKeyTypes) -> str:
    """
    The fingerprint of a public key.
    """
    der = key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return PREFIX + hashlib.sha256(der).hexdigest()


def spki_fingerprint(cert: x509.Certificate | crypto.X509) -> str:
    """
    The fingerprint of a certificate's public key.

    @param cert: a C{cryptography} certificate, or a pyOpenSSL one (as
        C{getPeerCertificate()} returns).
    """
    if isinstance(cert, crypto.X509):
        cert = cert.to_cryptography()
    return public_key_fingerprint(cert.public_key())


def parse_fingerprint(text: str) -> str:
    """
    Read a fingerprint as a person may type it: upper or lower case hex, with
    or without ':' between bytes, with or without the C{sha256:} prefix.

    @return: the fingerprint in its canonical form.
    @raise InvalidFingerprint: C{text} is not a SHA-256 fingerprint.
    """
    if not isinstance(text, str):
        raise InvalidFingerprint(repr(text))
    body = text.strip().lower()
    body = body.removeprefix(PREFIX)
    if _HEX_WITH_COLONS.fullmatch(body):
        body = body.replace(":", "")
    if _HEX.fullmatch(body) is None:
        raise InvalidFingerprint(text)
    return PREFIX + body


def peer_fingerprint(transport: _PeerCertificateHolder) -> str | None:
    """
    The fingerprint of the certificate the peer of a TLS C{transport} (an
    C{ISSLTransport}, such as a L{twisted.protocols.tls.TLSMemoryBIOProtocol})
    presented, or L{None} before the handshake or without one.
    """
    cert = transport.getPeerCertificate()
    if cert is None:
        return None
    return spki_fingerprint(cert)
