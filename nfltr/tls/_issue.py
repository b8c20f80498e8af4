# -*- test-case-name: tests.test_pki -*-
"""
The certificates nfltr makes for itself.

The relay's data directory holds, in C{tls/}: the relay CA (C{ca.key},
C{ca.crt}), the relay's server key and certificate signed by it
(C{relay.key}, C{relay.crt}), and the share CA (C{share-ca.key},
C{share-ca.crt}) that will sign agents' share certificates.  An agent's state
directory holds C{e2ee.key} and C{e2ee.crt}, a self-signed certificate that
clients pin.

All keys are ECDSA P-256, written 0600.  Each call reuses what it finds and
re-issues a certificate only when it is missing, expiring within
L{RENEW_BEFORE}, or no longer what was asked for; a re-issued certificate
keeps its key, and so its fingerprint.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import idna
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from twisted.logger import Logger

from nfltr.tls._files import (
    PKIError,
    load_certificate,
    load_or_create_key,
    locked_directory,
    save_certificate,
)
from nfltr.tls._fingerprint import PREFIX, public_key_fingerprint, spki_fingerprint

CA_LIFETIME = timedelta(days=3650)
LEAF_LIFETIME = timedelta(days=365)
SELF_SIGNED_LIFETIME = timedelta(days=3650)
RENEW_BEFORE = timedelta(days=30)
# Certificates start to be valid a little in the past, for peers whose clock is behind.
BACKDATE = timedelta(hours=1)
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
_MAX_COMMON_NAME = 64
_MAX_DNS_NAME = 253
_DNS_NAME = re.compile(
    r"(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
)

_log = Logger()


@dataclass(frozen=True)
class RelayPKI:
    """
    Where the relay's keys and certificates are.

    @ivar fingerprint: the relay certificate's SPKI fingerprint, for
        clients' C{--pin}.
    @ivar ca_fingerprint: the relay CA's.
    """

    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path
    share_ca_cert: Path
    share_ca_key: Path
    fingerprint: str
    ca_fingerprint: str


@dataclass(frozen=True)
class SelfSignedIdentity:
    """
    An agent's end-to-end TLS key and self-signed certificate.

    @ivar fingerprint: what clients pin (C{--pin}).
    """

    cert: Path
    key: Path
    fingerprint: str


def ensure_relay_pki(
    data_dir: str | os.PathLike[str],
    names: Sequence[str],
    *,
    share_domain: str | None = None,
    now: datetime | None = None,
) -> RelayPKI:
    """
    Create, on the first start, or reuse the relay CA, the relay certificate
    and the share CA in C{data_dir/tls}.

    @param names: the relay's public DNS names or IP addresses; the
        certificate names them all, plus C{localhost}, C{127.0.0.1} and
        C{::1}.
    @param share_domain: the share domain: the share CA may sign names
        under it only (a name constraint), and is re-issued (same key) when
        it changes.
    @param now: the current time (UTC), for tests.
    @raise PKIError: a name is invalid, or a key file is unreadable.
    """
    now = now or datetime.now(UTC)
    constraints: list[tuple[x509.ExtensionType, bool]] = []
    if share_domain is not None:
        permitted = [x509.DNSName(share_domain)]
        constraints.append((x509.NameConstraints(permitted, None), True))
    alt_names = subject_alt_names([*names, *LOCAL_NAMES])
    directory = Path(data_dir) / "tls"
    with locked_directory(directory):
        ca_key, ca_cert = _ensure_ca(directory, "ca", "nfltr relay CA", now)
        _ensure_ca(directory, "share-ca", "nfltr share CA", now, constraints)
        common_name = names[0] if names and len(names[0]) <= _MAX_COMMON_NAME else "nfltr relay"
        _, cert = _ensure_cert(
            directory,
            "relay",
            _Request(common_name, _server_extensions(), alt_names, LEAF_LIFETIME),
            (ca_key, ca_cert),
            now,
        )
    fingerprint = spki_fingerprint(cert)
    _log.info("relay certificate fingerprint {fingerprint}", fingerprint=fingerprint)
    return RelayPKI(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        cert=directory / "relay.crt",
        key=directory / "relay.key",
        share_ca_cert=directory / "share-ca.crt",
        share_ca_key=directory / "share-ca.key",
        fingerprint=fingerprint,
        ca_fingerprint=spki_fingerprint(ca_cert),
    )


def ensure_self_signed(
    state_dir: str | os.PathLike[str],
    common_name: str,
    *,
    now: datetime | None = None,
) -> SelfSignedIdentity:
    """
    Create, or reuse, the agent's end-to-end key and self-signed certificate
    in C{state_dir} (C{e2ee.key}, C{e2ee.crt}).  Clients trust it by its
    fingerprint alone, so its names and dates are informative.

    @param common_name: the certificate's subject (say, the agent's name).
    @param now: the current time (UTC), for tests.
    """
    now = now or datetime.now(UTC)
    directory = Path(state_dir)
    request = _Request(
        common_name[:_MAX_COMMON_NAME] or "nfltr agent",
        _server_extensions(),
        None,
        SELF_SIGNED_LIFETIME,
    )
    with locked_directory(directory):
        _, cert = _ensure_cert(directory, "e2ee", request, None, now)
    return SelfSignedIdentity(
        cert=directory / "e2ee.crt", key=directory / "e2ee.key", fingerprint=spki_fingerprint(cert)
    )


def subject_alt_names(names: Iterable[str]) -> list[x509.GeneralName]:
    """
    Turn host names and IP address literals into subjectAltName entries,
    without duplicates, in order.  Internationalised names are IDNA-encoded;
    a leading C{*.} is allowed.

    @raise PKIError: a name is neither a DNS name nor an IP address.
    """
    result: list[x509.GeneralName] = []
    for name in names:
        entry = _general_name(name)
        if entry not in result:
            result.append(entry)
    return result


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        pass
    text = name.strip().rstrip(".").lower()
    if not text.isascii():
        try:
            text = idna.encode(text, uts46=True).decode("ascii")
        except idna.IDNAError as e:
            raise PKIError(f"invalid relay name {name!r}: {e}") from e
    if len(text) > _MAX_DNS_NAME or _DNS_NAME.fullmatch(text) is None:
        raise PKIError(f"invalid relay name {name!r}: expected a DNS name or an IP address")
    return x509.DNSName(text)


@dataclass(frozen=True)
class _Request:
    """
    What a certificate must be: its subject's common name, its extensions,
    its subjectAltNames (L{None} for none), and how long it lives.
    """

    common_name: str
    extensions: list[tuple[x509.ExtensionType, bool]]
    alt_names: list[x509.GeneralName] | None
    lifetime: timedelta


_Issuer = tuple[ec.EllipticCurvePrivateKey, x509.Certificate]


def _ensure_ca(
    directory: Path, stem: str, title: str, now: datetime,
    extra: Sequence[tuple[x509.ExtensionType, bool]] = (),
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key, _ = load_or_create_key(directory / f"{stem}.key")
    # The key's fingerprint in the name keeps two relays' CAs apart in a trust store.
    tag = public_key_fingerprint(key.public_key())[len(PREFIX) : len(PREFIX) + 8]
    extensions = [
        (x509.BasicConstraints(ca=True, path_length=0), True),
        (_key_usage(key_cert_sign=True, crl_sign=True), True),
        *extra,
    ]
    request = _Request(f"{title} {tag}", extensions, None, CA_LIFETIME)
    return _ensure_cert(directory, stem, request, None, now, key=key)


def _ensure_cert(
    directory: Path,
    stem: str,
    request: _Request,
    issuer: _Issuer | None,
    now: datetime,
    *,
    key: ec.EllipticCurvePrivateKey | None = None,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """
    Load C{stem.key} (creating it if missing) and C{stem.crt}, re-issuing the
    certificate if it does not meet C{request}.  C{issuer} L{None} means
    self-signed.
    """
    if key is None:
        key, _ = load_or_create_key(directory / f"{stem}.key")
    path = directory / f"{stem}.crt"
    cert = load_certificate(path)
    problem = _problem(cert, key, request, issuer, now)
    if cert is not None and problem is None:
        return key, cert
    issuer_key, issuer_name = (key, None) if issuer is None else (issuer[0], issuer[1].subject)
    cert = _issue(key, request, issuer_key, issuer_name, now)
    save_certificate(path, cert)
    if problem == NO_CERTIFICATE:
        _log.info("created {path}", path=str(path))
    else:
        _log.info("re-issued {path} ({reason})", path=str(path), reason=problem)
    return key, cert


NO_CERTIFICATE = "no certificate"


def _problem(
    cert: x509.Certificate | None,
    key: ec.EllipticCurvePrivateKey,
    request: _Request,
    issuer: _Issuer | None,
    now: datetime,
) -> str | None:
    """
    Why C{cert} must be re-issued, or L{None} if it is fine.
    """
    if cert is None:
        return NO_CERTIFICATE
    return _trust_problem(cert, key, issuer, now) or _content_problem(cert, request)


def _trust_problem(
    cert: x509.Certificate,
    key: ec.EllipticCurvePrivateKey,
    issuer: _Issuer | None,
    now: datetime,
) -> str | None:
    if public_key_fingerprint(cert.public_key()) != public_key_fingerprint(key.public_key()):
        return "certificate does not match the key"
    try:
        cert.verify_directly_issued_by(cert if issuer is None else issuer[1])
    except (ValueError, TypeError, InvalidSignature):
        return "certificate not signed by its issuer"
    if cert.not_valid_before_utc > now or cert.not_valid_after_utc - now < RENEW_BEFORE:
        return "certificate expiring or not yet valid"
    return None


def _content_problem(cert: x509.Certificate, request: _Request) -> str | None:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if [n.value for n in names] != [request.common_name]:
        return "subject changed"
    wanted = [e for e, _ in request.extensions if isinstance(e, x509.NameConstraints)]
    try:
        held = [cert.extensions.get_extension_for_class(x509.NameConstraints).value]
    except x509.ExtensionNotFound:
        held = []
    if held != wanted:
        return "name constraints changed"
    if request.alt_names is None:
        return None
    try:
        present = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "names changed"
    if set(present) != set(request.alt_names):
        return "names changed"
    return None


def _issue(
    key: ec.EllipticCurvePrivateKey,
    request: _Request,
    issuer_key: ec.EllipticCurvePrivateKey,
    issuer_name: x509.Name | None,
    now: datetime,
) -> x509.Certificate:
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "nfltr"),
            x509.NameAttribute(NameOID.COMMON_NAME, request.common_name),
        ]
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if issuer_name is None else issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + request.lifetime)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), False
        )
    )
    for extension, critical in request.extensions:
        builder = builder.add_extension(extension, critical)
    if request.alt_names is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(request.alt_names), False)
    return builder.sign(issuer_key, hashes.SHA256())


def _server_extensions() -> list[tuple[x509.ExtensionType, bool]]:
    """
    The extensions of a TLS server's (end-entity) certificate.
    """
    return [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (_key_usage(digital_signature=True), True),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
    ]


def _key_usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )
