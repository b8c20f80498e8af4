# -*- test-case-name: tests.test_pki -*-
"""
TLS connection creators for Twisted's TLS (L{twisted.protocols.tls}).

Both sides: TLS 1.2 at least, AEAD ciphers only with AES-GCM first (ChaCha20
allowed, not forced), no compression, no renegotiation, no session tickets (but see
L{nfltr.tls._resume} for the end-to-end tunnel leg).
Partial writes are off, so that one C{SSL_write} encrypts a whole write
(L{nfltr.tls.BatchingTLSProtocol}); OpenSSL releases a connection's record
buffers while it is idle, unless the TLS factory the connection is made for
says not to (C{releaseBuffers}: the reactor's C{NFLTR_TLS_RELEASE_BUFFERS=0},
set by L{nfltr.tls.tls_factory} and L{nfltr.tls.E2EETLSFactory}).  A
context is never changed once made: pyOpenSSL refuses that after its first
connection, so the choice is made per connection.

A client trusts the peer one of two ways:

  - C{ca_path}: the chain must lead to that CA, and the certificate must
    name the host (checked with C{service_identity});
  - C{pin}: the leaf's public key must have that fingerprint; the chain,
    the names and the dates are not looked at, as with SSH host keys (this
    is how agents' self-made certificates are trusted).

A rejection never raises inside OpenSSL's callback: the callback returns
false and hands a L{VerificationFailed} to the TLS protocol's
C{failVerification}, which delivers it to the application protocol's
C{connectionLost}, so the caller can print why.
"""

from __future__ import annotations

import ipaddress
import os

import idna
from cryptography import x509
from OpenSSL import SSL, crypto
from service_identity import VerificationError
from service_identity.cryptography import (
    verify_certificate_hostname,
    verify_certificate_ip_address,
)
from twisted.internet.interfaces import (
    IOpenSSLClientConnectionCreator,
    IOpenSSLServerConnectionCreator,
)
from twisted.protocols.tls import TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.tls._direct import keep_buffers
from nfltr.tls._files import PKIError
from nfltr.tls._fingerprint import parse_fingerprint, spki_fingerprint
from nfltr.tls._sessions import SessionMemory

_TLS12_CIPHERS = (
    b"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    b"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    b"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
)
_TLS13_SUITES = b"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
OPTIONS = (
    SSL.OP_NO_COMPRESSION
    | SSL.OP_NO_RENEGOTIATION
    | SSL.OP_NO_TICKET
    | SSL.OP_CIPHER_SERVER_PREFERENCE
)

#: C{SSL_MODE_ENABLE_PARTIAL_WRITE} (OpenSSL's ssl.h), which pyOpenSSL sets
#: on every context and does not name.
MODE_ENABLE_PARTIAL_WRITE = 0x1

_VERIFY_ERRORS = {
    value: name.removeprefix("ERR_").lower().replace("_", " ")
    for name, value in vars(SSL.X509VerificationCodes).items()
    if name.isupper()
}


class TLSConfigError(ValueError):
    """
    A TLS creator was asked for with contradictory or missing settings.
    """


class VerificationFailed(Exception):
    """
    The peer's certificate was refused; the message says why, for people.
    """


class PinMismatch(VerificationFailed):
    """
    The peer's key does not have the pinned fingerprint.

    @ivar actual: the fingerprint the peer presented.
    @ivar expected: the pin.
    """

    def __init__(self, role: str, actual: str, expected: str) -> None:
        super().__init__(f"{role} certificate fingerprint {actual} does not match --pin {expected}")
        self.actual = actual
        self.expected = expected


class CertificateRejected(VerificationFailed):
    """
    The peer's chain does not lead to the CA, or its certificate does not
    name the host.
    """


def _base_context(options: int = OPTIONS) -> SSL.Context:
    context = SSL.Context(SSL.TLS_METHOD)
    context.set_min_proto_version(SSL.TLS1_2_VERSION)
    context.set_options(options)
    context.clear_mode(MODE_ENABLE_PARTIAL_WRITE)
    context.set_mode(SSL.MODE_RELEASE_BUFFERS)
    context.set_cipher_list(_TLS12_CIPHERS)
    context.set_tls13_ciphersuites(_TLS13_SUITES)
    context.set_session_cache_mode(SSL.SESS_CACHE_OFF)
    return context


def _connection(context: SSL.Context, tlsProtocol: TLSMemoryBIOProtocol) -> SSL.Connection:
    """
    A connection from C{context} for C{tlsProtocol}, keeping its record
    buffers while idle if C{tlsProtocol}'s factory says C{releaseBuffers} is
    off.
    """
    connection = SSL.Connection(context, None)
    if not getattr(getattr(tlsProtocol, "factory", None), "releaseBuffers", True):
        keep_buffers(connection)
    return connection


@implementer(IOpenSSLServerConnectionCreator)
class ServerTLS:
    """
    Creates server-side TLS connections from one context, loaded once (never
    in a TLS callback).

    @ivar context: the shared L{SSL.Context}.
    """

    def __init__(self, context: SSL.Context) -> None:
        self.context = context

    def serverConnectionForTLS(self, tlsProtocol: TLSMemoryBIOProtocol) -> SSL.Connection:
        """
        A new server connection for C{tlsProtocol}.
        """
        return _connection(self.context, tlsProtocol)


def server_context_factory(
    cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str]
) -> ServerTLS:
    """
    A server connection creator presenting the certificate (and any chain
    after it) in C{cert_path} with the key in C{key_path}.

    @raise PKIError: the files cannot be read or do not match.
    """
    return ServerTLS(server_context(cert_path, key_path))


def server_context(
    cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str],
    options: int = OPTIONS,
) -> SSL.Context:
    """
    A server context (nfltr's settings, C{options}) presenting the
    certificate and chain in C{cert_path} with the key in C{key_path}.

    @raise PKIError: the files cannot be read or do not match.
    """
    context = _base_context(options)
    try:
        context.use_certificate_chain_file(os.fspath(cert_path))
        context.use_privatekey_file(os.fspath(key_path))
        context.check_privatekey()
    except SSL.Error as e:
        raise PKIError(f"cannot serve TLS with {cert_path} and {key_path}: {e}") from e
    return context


@implementer(IOpenSSLClientConnectionCreator)
class ClientTLS:
    """
    Creates client-side TLS connections that send C{hostname} as the server
    name (unless it is an IP address) and verify the server by a CA or by a
    pin.

    @ivar sessions: where the last session is kept and offered again
        (L{nfltr.tls.resuming_client}); L{None}: no resumption.
    """

    sessions: SessionMemory | None = None

    def __init__(
        self,
        context: SSL.Context,
        hostname: str,
        *,
        ca_path: str | None,
        pin: str | None,
        role: str,
    ) -> None:
        self.context = context
        self.hostname = hostname
        self.ca_path = ca_path
        self.pin = pin
        self.role = role
        self._ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None
        try:
            self._ip = ipaddress.ip_address(hostname)
        except ValueError:
            self._ip = None
        self._server_name = None if self._ip is not None else _idna(hostname)

    def clientConnectionForTLS(self, tlsProtocol: TLSMemoryBIOProtocol) -> SSL.Connection:
        """
        A new client connection for C{tlsProtocol}, verified by a callback of
        its own that reports a refusal to C{tlsProtocol}.
        """
        connection = _connection(self.context, tlsProtocol)
        if self._server_name is not None:
            connection.set_tlsext_host_name(self._server_name)
        connection.set_verify(SSL.VERIFY_PEER, _Verifier(self, tlsProtocol))
        if self.sessions is not None:
            self.sessions.offer(connection)
        return connection

    def check(
        self, cert: crypto.X509, error: int, depth: int, ok: bool
    ) -> VerificationFailed | None:
        """
        Judge one certificate of the peer's chain as OpenSSL presents it.

        @return: why it is refused, or L{None} to go on.
        """
        if self.pin is not None:
            return self._check_pin(cert, depth, self.pin)
        return self._check_ca(cert, error, depth, ok)

    def _check_pin(self, cert: crypto.X509, depth: int, pin: str) -> VerificationFailed | None:
        if depth != 0:
            return None  # only the leaf's key counts; no chain is needed
        actual = spki_fingerprint(cert)
        if actual != pin:
            return PinMismatch(self.role, actual, pin)
        return None

    def _check_ca(
        self, cert: crypto.X509, error: int, depth: int, ok: bool
    ) -> VerificationFailed | None:
        if not ok:
            reason = _VERIFY_ERRORS.get(error, f"error {error}")
            return CertificateRejected(
                f"{self.role} certificate is not trusted by {self.ca_path}: {reason}"
                f" (certificate {depth} of the chain)"
            )
        if depth != 0:
            return None
        leaf = cert.to_cryptography()
        try:
            if self._ip is not None:
                verify_certificate_ip_address(leaf, str(self._ip))
            else:
                verify_certificate_hostname(leaf, self.hostname)
        except VerificationError:
            return CertificateRejected(
                f"{self.role} certificate is not valid for {self.hostname!r}"
                f" (it names {_names(leaf)})"
            )
        return None


class _Verifier:
    """
    The verify callback of one connection.  It never raises into OpenSSL:
    anything unexpected is a refusal too.
    """

    def __init__(self, creator: ClientTLS, protocol: TLSMemoryBIOProtocol) -> None:
        self._creator = creator
        self._protocol: TLSMemoryBIOProtocol | None = protocol

    def __call__(
        self, connection: SSL.Connection, cert: crypto.X509, error: int, depth: int, ok: int
    ) -> bool:
        try:
            refusal = self._creator.check(cert, error, depth, bool(ok))
        except Exception as e:  # noqa: BLE001 - an exception must not reach OpenSSL
            refusal = VerificationFailed(
                f"{self._creator.role} certificate could not be checked: {e!r}"
            )
        if refusal is None:
            return True
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.failVerification(Failure(refusal))
        return False


def client_creator(
    hostname: str,
    ca_path: str | os.PathLike[str] | None = None,
    pin: str | None = None,
    *,
    role: str = "relay",
) -> ClientTLS:
    """
    A client connection creator for a server called C{hostname}.

    @param ca_path: a PEM file of CA certificates: verify the chain, and
        that the certificate names C{hostname} (a DNS name or an IP address).
    @param pin: a fingerprint in any form L{parse_fingerprint} reads: accept
        exactly the leaf whose key has it.
    @param role: what the peer is, for messages ("relay", "agent").
    @raise TLSConfigError: not exactly one of C{ca_path} and C{pin} given.
    @raise InvalidFingerprint: C{pin} is not a fingerprint.
    @raise PKIError: C{ca_path} cannot be loaded.
    """
    if (ca_path is None) == (pin is None):
        raise TLSConfigError(
            "give exactly one of ca_path (verify the chain and the host name)"
            " and pin (trust the key with this fingerprint)"
        )
    context = _base_context()
    ca = None if ca_path is None else os.fspath(ca_path)
    if ca is not None:
        try:
            context.load_verify_locations(ca)
        except SSL.Error as e:
            raise PKIError(f"cannot load CA certificates from {ca}: {e}") from e
    canonical = None if pin is None else parse_fingerprint(pin)
    return ClientTLS(context, hostname, ca_path=ca, pin=canonical, role=role)


def _idna(hostname: str) -> bytes:
    if hostname.isascii():
        return hostname.lower().encode("ascii")
    try:
        return idna.encode(hostname, uts46=True)
    except idna.IDNAError as e:
        raise TLSConfigError(f"invalid host name {hostname!r}: {e}") from e


def _names(cert: x509.Certificate) -> str:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no names"
    return ", ".join(str(name.value) for name in san) or "no names"


def ssl_words(error: BaseException | None) -> str:
    """
    OpenSSL's reasons in an C{SSL.Error} (a list of C{(library, function,
    reason)}), as words rather than a Python list.
    """
    args = getattr(error, "args", ())
    errors = args[0] if args and isinstance(args[0], list) else []
    words = [str(entry[-1]) for entry in errors if isinstance(entry, tuple) and entry]
    return "; ".join(word for word in words if word) or "no reason given"
