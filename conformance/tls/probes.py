"""
Probes of one TLS leg for what sslyze does not see.

sslyze 6.3 scans through nassl, whose OpenSSL (1.1.1) knows neither the
hybrid post-quantum groups nor TLS 1.3 session tickets, so three things are
probed here, with the tools that can:

  - L{group_probes}: hand-made TLS 1.3 ClientHellos (plain bytes, no TLS
    library), one per named group (offered alone, with no key share: a
    server that supports the group answers with a HelloRetryRequest naming
    it, one that does not with an alert), and two that tell the server's
    preference (the hybrid group offered last, with a key share for X25519
    only: a server that prefers the hybrid asks for it with a
    HelloRetryRequest; one that takes the client's order answers X25519);
  - L{handshake_probe}: a full handshake with pyOpenSSL's defaults (the
    OpenSSL in the cryptography wheel, 3.5 or later, offers X25519MLKEM768
    first with a key share): the group, version and cipher agreed, and the
    certificate served, verified against the CA the leg must chain to;
  - L{ticket_probe}: Python's C{ssl} (the system OpenSSL) counts the
    NewSessionTicket messages the server sends after a handshake (TLS 1.2
    and 1.3) and tries to resume with what it got.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from OpenSSL import SSL

from nfltr.tls import spki_fingerprint

TIMEOUT = 10.0

#: IANA TLS Supported Groups (the registry's names), all probed in TLS 1.3.
#: 1-22 and the plain brainpool curves are TLS 1.2 only: a TLS 1.3 server
#: must not pick them.
GROUPS: dict[int, str] = {
    **dict(enumerate([
        "sect163k1", "sect163r1", "sect163r2", "sect193r1", "sect193r2", "sect233k1",
        "sect233r1", "sect239k1", "sect283k1", "sect283r1", "sect409k1", "sect409r1",
        "sect571k1", "sect571r1", "secp160k1", "secp160r1", "secp160r2", "secp192k1",
        "secp192r1", "secp224k1", "secp224r1", "secp256k1",
    ], start=1)),
    0x0017: "secp256r1",
    0x0018: "secp384r1",
    0x0019: "secp521r1",
    0x001A: "brainpoolP256r1",
    0x001B: "brainpoolP384r1",
    0x001C: "brainpoolP512r1",
    0x001D: "x25519",
    0x001E: "x448",
    0x001F: "brainpoolP256r1tls13",
    0x0020: "brainpoolP384r1tls13",
    0x0021: "brainpoolP512r1tls13",
    0x0100: "ffdhe2048",
    0x0101: "ffdhe3072",
    0x0102: "ffdhe4096",
    0x0103: "ffdhe6144",
    0x0104: "ffdhe8192",
    0x0200: "MLKEM512",
    0x0201: "MLKEM768",
    0x0202: "MLKEM1024",
    0x11EB: "SecP256r1MLKEM768",
    0x11EC: "X25519MLKEM768",
    0x11ED: "SecP384r1MLKEM1024",
    0x6399: "X25519Kyber768Draft00",
    0x639A: "SecP256r1Kyber768Draft00",
}
HYBRID = 0x11EC
X25519 = 0x001D
SECP256R1 = 0x0017

_TLS13_SUITES = (0x1301, 0x1302, 0x1303)
_SIGNATURE_ALGORITHMS = (
    0x0403, 0x0503, 0x0603, 0x0807, 0x0808, 0x0804, 0x0805, 0x0806, 0x0401, 0x0501, 0x0601,
)
#: ServerHello.random of a HelloRetryRequest (RFC 8446, 4.1.3).
_HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
_ALERTS = {
    10: "unexpected_message", 40: "handshake_failure", 47: "illegal_parameter",
    50: "decode_error", 70: "protocol_version", 71: "insufficient_security",
    80: "internal_error", 109: "missing_extension", 112: "unrecognized_name",
}
_EXT_KEY_SHARE = 51
#: What Python's ssl message callback calls a NewSessionTicket (a private enum).
_NEW_SESSION_TICKET = ssl._TLSMessageType.NEWSESSION_TICKET  # type: ignore[attr-defined]
_EXT_SUPPORTED_VERSIONS = 43


def _u16(value: int) -> bytes:
    return struct.pack("!H", value)


def _vec8(data: bytes) -> bytes:
    return bytes([len(data)]) + data


def _vec16(data: bytes) -> bytes:
    return _u16(len(data)) + data


def _extension(kind: int, data: bytes) -> bytes:
    return _u16(kind) + _vec16(data)


def client_hello(server_name: str | None, groups: list[int], shares: dict[int, bytes]) -> bytes:
    """
    One record holding a TLS 1.3-only ClientHello offering C{groups} in
    that order, with key shares C{shares} (group to public key).
    """
    extensions = b""
    if server_name is not None:
        name = server_name.encode("ascii")
        entry = b"\x00" + _vec16(name)
        extensions += _extension(0, _vec16(entry))
    extensions += _extension(10, _vec16(b"".join(_u16(g) for g in groups)))
    extensions += _extension(13, _vec16(b"".join(_u16(s) for s in _SIGNATURE_ALGORITHMS)))
    extensions += _extension(_EXT_SUPPORTED_VERSIONS, _vec8(_u16(0x0304)))
    extensions += _extension(45, _vec8(b"\x01"))  # psk_key_exchange_modes: psk_dhe_ke
    extensions += _extension(
        _EXT_KEY_SHARE, _vec16(b"".join(_u16(g) + _vec16(k) for g, k in shares.items()))
    )
    body = (
        _u16(0x0303) + os.urandom(32) + _vec8(os.urandom(32))
        + _vec16(b"".join(_u16(c) for c in _TLS13_SUITES)) + b"\x01\x00" + _vec16(extensions)
    )
    handshake = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + _vec16(handshake)


def _records(sock: socket.socket) -> Iterator[tuple[int, bytes]]:
    """
    The records the server sends, until it closes.
    """
    buffer = b""
    while data := sock.recv(65536):
        buffer += data
        while len(buffer) >= 5:  # noqa: PLR2004 - a record header
            kind, _version, length = struct.unpack_from("!BHH", buffer)
            if len(buffer) < 5 + length:
                break
            yield kind, buffer[5:5 + length]
            buffer = buffer[5 + length:]


def _read_server_hello(sock: socket.socket) -> dict[str, Any]:
    """
    Read records until the server's ServerHello (or HelloRetryRequest), an
    alert or the end: what the server answered.
    """
    handshake = b""
    try:
        for kind, fragment in _records(sock):
            if kind != 22:  # noqa: PLR2004 - handshake
                return _other_record(kind, fragment)
            handshake += fragment
            size = int.from_bytes(handshake[1:4], "big")
            if len(handshake) >= 4 and len(handshake) >= 4 + size:  # noqa: PLR2004
                return _server_hello(handshake[0], handshake[4:4 + size])
    except TimeoutError:
        return {"answer": "timeout"}
    except OSError as e:
        return {"answer": "closed", "error": str(e)}
    return {"answer": "closed"}


def _other_record(kind: int, fragment: bytes) -> dict[str, Any]:
    if kind == 21:  # noqa: PLR2004 - alert
        return {"answer": "alert", "alert": _ALERTS.get(fragment[1], str(fragment[1]))}
    return {"answer": f"record type {kind}"}


def _server_hello(message: int, body: bytes) -> dict[str, Any]:
    if message != 2:  # noqa: PLR2004 - server_hello
        return {"answer": f"handshake message {message}"}
    random = body[2:34]
    pos = 34
    pos += 1 + body[pos]
    (cipher,) = struct.unpack_from("!H", body, pos)
    pos += 3
    (end,) = struct.unpack_from("!H", body, pos)
    pos += 2
    end += pos
    group = version = None
    while pos < end:
        kind, length = struct.unpack_from("!HH", body, pos)
        data = body[pos + 4:pos + 4 + length]
        pos += 4 + length
        if kind == _EXT_KEY_SHARE:
            (group,) = struct.unpack_from("!H", data)
        elif kind == _EXT_SUPPORTED_VERSIONS:
            (version,) = struct.unpack_from("!H", data)
    answer = "hello_retry_request" if random == _HRR_RANDOM else "server_hello"
    return {
        "answer": answer,
        "group": None if group is None else GROUPS.get(group, f"0x{group:04x}"),
        "cipher": f"0x{cipher:04x}",
        "version": "0x0303" if version is None else f"0x{version:04x}",
    }


def exchange_hello(address: tuple[str, int], hello: bytes) -> dict[str, Any]:
    """
    Send C{hello}; what the server answered first.
    """
    with socket.create_connection(address, timeout=TIMEOUT) as sock:
        sock.sendall(hello)
        return _read_server_hello(sock)


def _x25519_share() -> bytes:
    return X25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def group_probes(address: tuple[str, int], server_name: str | None) -> dict[str, Any]:
    """
    Which groups the leg accepts in TLS 1.3 (each offered alone, with no key
    share), and which it picks from two lists that name the hybrid.
    """
    accepted: list[str] = []
    rejected: dict[str, str] = {}
    for code, name in GROUPS.items():
        answer = exchange_hello(address, client_hello(server_name, [code], {}))
        if answer["answer"] == "hello_retry_request" and answer["group"] == name:
            accepted.append(name)
        else:
            rejected[name] = answer.get("alert") or answer["answer"]
    preference = {
        "x25519,secp256r1,X25519MLKEM768 (share: x25519)": exchange_hello(
            address,
            client_hello(server_name, [X25519, SECP256R1, HYBRID], {X25519: _x25519_share()}),
        ),
        "X25519MLKEM768,x25519 (share: x25519)": exchange_hello(
            address, client_hello(server_name, [HYBRID, X25519], {X25519: _x25519_share()})
        ),
    }
    return {"tls1_3_accepted": accepted, "tls1_3_rejected": rejected, "preference": preference}


def handshake_probe(address: tuple[str, int], server_name: str | None, ca: tuple[str, str],
                    max_version: int | None = None) -> dict[str, Any]:
    """
    A full handshake with pyOpenSSL's default groups and suites, the chain
    verified against C{ca} (its name and its file): what was agreed and who
    answered.
    """
    context = SSL.Context(SSL.TLS_METHOD)
    context.set_min_proto_version(SSL.TLS1_2_VERSION)
    if max_version is not None:
        context.set_max_proto_version(max_version)
    context.load_verify_locations(ca[1])
    context.set_verify(SSL.VERIFY_PEER, lambda *args: bool(args[-1]))
    with socket.create_connection(address, timeout=TIMEOUT) as sock:
        connection = SSL.Connection(context, sock)
        if server_name is not None:
            connection.set_tlsext_host_name(server_name.encode("ascii"))
        connection.set_connect_state()
        try:
            _handshake(sock, connection)
        except (SSL.Error, OSError) as e:
            return {"error": repr(e)}
        cert = connection.get_peer_certificate(as_cryptography=True)
        result = {
            "openssl": SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode(),
            "version": connection.get_protocol_version_name(),
            "cipher": connection.get_cipher_name(),
            "group": connection.get_group_name(),
            "verified_by": ca[0],
            "leaf": _describe(cert) if cert is not None else None,
        }
        return result


def _handshake(sock: socket.socket, connection: SSL.Connection) -> None:
    """
    Drive C{connection}'s handshake on a socket with a timeout (pyOpenSSL
    raises C{WantReadError} where a blocking socket would wait).
    """
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            connection.do_handshake()
        except SSL.WantReadError:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise TimeoutError("handshake timed out") from None
        else:
            return


def _describe(cert: x509.Certificate) -> dict[str, Any]:
    try:
        names = [
            str(n.value)
            for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        ]
    except x509.ExtensionNotFound:
        names = []
    return {
        "subject": cert.subject.rfc4514_string(),
        "issuer": cert.issuer.rfc4514_string(),
        "names": names,
        "key": type(cert.public_key()).__name__.lstrip("_"),
        "spki_sha256": spki_fingerprint(cert),
    }


def ticket_probe(address: tuple[str, int], server_name: str | None,
                 version: ssl.TLSVersion) -> dict[str, Any]:
    """
    Two connections at C{version} with Python's C{ssl}: how many
    NewSessionTicket messages each got, and whether the second resumed
    the first's session.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = context.maximum_version = version
    tickets: list[int] = []

    def callback(_conn: object, direction: str, _version: object, _content: object,
                 message: object, _data: bytes) -> None:
        if direction == "read" and message == _NEW_SESSION_TICKET:
            tickets[-1] += 1

    # The only way Python's ssl shows handshake messages (a debugging hook).
    context._msg_callback = callback  # type: ignore[attr-defined]

    def connect(session: ssl.SSLSession | None) -> dict[str, Any]:
        tickets.append(0)
        with socket.create_connection(address, timeout=TIMEOUT) as raw, context.wrap_socket(
            raw, server_hostname=server_name, session=session
        ) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            deadline = time.monotonic() + TIMEOUT
            try:
                while sock.recv(65536) and time.monotonic() < deadline:
                    pass
            except (OSError, ssl.SSLError):
                pass
            got = sock.session
            return {
                "version": sock.version(),
                "new_session_tickets": tickets[-1],
                "session_has_ticket": bool(got and got.has_ticket),
                "resumed": sock.session_reused,
                "session": got,
            }

    try:
        first = connect(None)
        second = connect(first["session"])
    except (OSError, ssl.SSLError) as e:
        return {"client_openssl": ssl.OPENSSL_VERSION, "error": repr(e)}
    for one in (first, second):
        del one["session"]
    return {"client_openssl": ssl.OPENSSL_VERSION, "first": first, "second": second}


def probe_leg(address: tuple[str, int], server_name: str | None, ca: tuple[str, str]
              ) -> dict[str, Any]:
    """
    Every probe of this module against one leg.
    """
    return {
        "groups": group_probes(address, server_name),
        "handshake": handshake_probe(address, server_name, ca),
        "handshake_tls1_2": handshake_probe(address, server_name, ca, SSL.TLS1_2_VERSION),
        "tickets_tls1_3": ticket_probe(address, server_name, ssl.TLSVersion.TLSv1_3),
        "tickets_tls1_2": ticket_probe(address, server_name, ssl.TLSVersion.TLSv1_2),
    }
