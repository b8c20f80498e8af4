# -*- test-case-name: tests.test_share_certs -*-
"""
Share certificates: what the relay's share CA signs, and the agent's side of
it.

An end-to-end (C{e2ee}) share's key never leaves its agent: the agent sends a
certificate signing request in its hello (L{share_request}), the relay's
L{ShareCA} signs it for C{NAME.SHARE_DOMAIN} only, whatever names the
request asked for, and the agent serves TLS with the result
(L{server_tls_from_pem}).  For an C{inspect} share the relay ends TLS itself:
L{ShareCA.issue} makes a key and certificate in memory, never written to disk.

The share CA is name-constrained to the share domain (see
L{nfltr.tls.ensure_relay_pki}), so a visitor who trusts it trusts it for
share names only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from OpenSSL import SSL, crypto

from nfltr.tls._contexts import OPTIONS, ServerTLS, _base_context
from nfltr.tls._files import PKIError, load_certificate, load_or_create_key
from nfltr.tls._issue import BACKDATE, RelayPKI, _server_extensions

#: How long a share certificate is valid; an agent gets a new one each time
#: it connects.
SHARE_CERT_LIFETIME = timedelta(days=90)
#: The largest signing request the relay reads (PEM characters).
MAX_REQUEST_SIZE = 8192
_MIN_RSA_BITS = 2048
_CURVES = (ec.SECP256R1, ec.SECP384R1)


class ShareCertError(ValueError):
    """
    A signing request cannot be signed; the text says why.
    """


def share_request(key: ec.EllipticCurvePrivateKey, fqdn: str) -> str:
    """
    The PEM signing request an agent sends for the share C{fqdn}.
    """
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, fqdn[:64])]))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(fqdn)]), False)
        .sign(key, hashes.SHA256())
    )
    return request.public_bytes(serialization.Encoding.PEM).decode("ascii")


def load_share_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """
    The agent's share key in C{path} (created 0600 on first use).
    """
    key, _ = load_or_create_key(path)
    return key


def server_tls_from_pem(key: ec.EllipticCurvePrivateKey, chain_pem: str) -> ServerTLS:
    """
    A server connection creator presenting C{chain_pem} (leaf first, then
    its CA) with C{key}.

    @raise PKIError: the chain is unreadable or does not match the key.
    """
    try:
        certs = x509.load_pem_x509_certificates(chain_pem.encode("ascii"))
    except ValueError as e:
        raise PKIError(f"the relay sent an unreadable share certificate: {e}") from e
    return _server_tls(key, certs)


def _server_tls(
    key: ec.EllipticCurvePrivateKey, certs: list[x509.Certificate]
) -> ServerTLS:
    context = server_context_of(key, certs)
    context.set_alpn_select_callback(_choose_protocol)
    return ServerTLS(context)


def server_context_of(
    key: Any, certs: list[x509.Certificate], options: int = OPTIONS
) -> SSL.Context:
    """
    A server context (nfltr's settings, C{options}) presenting C{certs}
    (leaf first) with C{key}.

    @raise PKIError: no certificate, or they do not match the key.
    """
    context = _base_context(options)
    try:
        context.use_certificate(crypto.X509.from_cryptography(certs[0]))
        for extra in certs[1:]:
            context.add_extra_chain_cert(crypto.X509.from_cryptography(extra))
        context.use_privatekey(crypto.PKey.from_cryptography_key(key))
        context.check_privatekey()
    except (SSL.Error, IndexError) as e:
        raise PKIError(f"the certificate does not match its key: {e}") from e
    return context


#: The ALPN protocols a share's TLS takes, in its order of preference: HTTP/2
#: (nfltr.http.h2proxy), then HTTP/1.1.
SHARE_ALPN = (b"h2", b"http/1.1")


def _choose_protocol(
    connection: SSL.Connection, offered: list[bytes],
) -> Any:
    """
    The first of L{SHARE_ALPN} the visitor offers; none: pyOpenSSL's
    C{NO_OVERLAPPING_PROTOCOLS}, no ALPN (the handshake goes on, HTTP/1.1
    follows).  Typed L{Any}: the type of that value is private.
    """
    for protocol in SHARE_ALPN:
        if protocol in offered:
            return protocol
    return SSL.NO_OVERLAPPING_PROTOCOLS


class ShareCA:
    """
    The relay's share CA, loaded once at start.

    @ivar domain: the share domain; certificates name C{LABEL.domain}.
    @ivar lifetime: how long the certificates it makes are valid.
    """

    def __init__(
        self, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate, domain: str,
        lifetime: timedelta = SHARE_CERT_LIFETIME,
    ) -> None:
        self.key = key
        self.cert = cert
        self.domain = domain
        self.lifetime = lifetime
        self.pem = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")

    @classmethod
    def load(cls, pki: RelayPKI, domain: str) -> ShareCA:
        """
        Read the share CA of C{pki}.

        @raise PKIError: its files are missing or unreadable.
        """
        key, _ = load_or_create_key(pki.share_ca_key)
        cert = load_certificate(pki.share_ca_cert)
        if cert is None:
            raise PKIError(f"cannot read the share CA certificate {pki.share_ca_cert}")
        return cls(key, cert, domain)

    def fqdn(self, name: str) -> str:
        """
        The host name of the share C{name}.
        """
        return f"{name}.{self.domain}"

    def sign(self, request_pem: str, name: str, now: datetime | None = None) -> str:
        """
        Sign an agent's request for the share C{name}: the certificate names
        C{name.domain} only (the names the request asks for are ignored).

        @return: the certificate and the share CA, PEM, leaf first.
        @raise ShareCertError: the request is unreadable, badly signed, or
            holds a weak or unsupported key.
        """
        if not isinstance(request_pem, str) or len(request_pem) > MAX_REQUEST_SIZE:
            raise ShareCertError(
                f"a share needs a PEM signing request under {MAX_REQUEST_SIZE} characters"
            )
        try:
            request = x509.load_pem_x509_csr(request_pem.encode("ascii"))
            valid = request.is_signature_valid
            public = request.public_key()
        except (ValueError, UnicodeEncodeError) as e:
            raise ShareCertError(f"unreadable signing request: {e}") from None
        if not valid:
            raise ShareCertError("the signing request's signature is invalid")
        _check_public_key(public)
        cert = self._issue(public, name, now)
        return cert.public_bytes(serialization.Encoding.PEM).decode("ascii") + self.pem

    def issue(self, name: str, now: datetime | None = None) -> ServerTLS:
        """
        A key and certificate, in memory, for a share whose TLS the relay
        ends itself (C{inspect}).
        """
        key = ec.generate_private_key(ec.SECP256R1())
        return _server_tls(key, [self._issue(key.public_key(), name, now), self.cert])

    def _issue(self, public: object, name: str, now: datetime | None) -> x509.Certificate:
        now = now or datetime.now(UTC)
        fqdn = self.fqdn(name)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, fqdn[:64])]))
            .issuer_name(self.cert.subject)
            .public_key(public)  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + self.lifetime)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(fqdn)]), False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False
            )
        )
        for extension, critical in _server_extensions():
            builder = builder.add_extension(extension, critical)
        return builder.sign(self.key, hashes.SHA256())


def _check_public_key(public: object) -> None:
    if isinstance(public, ec.EllipticCurvePublicKey):
        if not isinstance(public.curve, _CURVES):
            raise ShareCertError(f"unsupported curve {public.curve.name}: use P-256 or P-384")
    elif isinstance(public, rsa.RSAPublicKey):
        if public.key_size < _MIN_RSA_BITS:
            raise ShareCertError(f"RSA key of {public.key_size} bits: at least {_MIN_RSA_BITS}")
    else:
        raise ShareCertError("unsupported key type: use ECDSA P-256/P-384 or RSA")
