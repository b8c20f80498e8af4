"""
Tests for L{nfltr.ssh._kexinit}: reading and writing KEXINIT, and the
negotiation rules (RFC 4253 section 7.1 with OpenSSH's amendments for AEAD
ciphers and the extension pseudo-algorithms).
"""

from __future__ import annotations

import contextlib
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.ssh._kexinit import (
    EXT_INFO_CLIENT,
    EXT_INFO_SERVER,
    STRICT_KEX_CLIENT,
    STRICT_KEX_SERVER,
    KexInit,
    KexInitError,
    NegotiationError,
    guessed_wrong,
    negotiate,
)

SETTINGS = settings(max_examples=200, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

GCM = b"aes256-gcm@openssh.com"
CTR = b"aes128-ctr"
ETM = b"hmac-sha2-256-etm@openssh.com"
AEAD = frozenset({GCM})


def kexinit(kex: tuple[bytes, ...] = (b"curve25519-sha256",),
            host_key: tuple[bytes, ...] = (b"ssh-ed25519",),
            ciphers: tuple[bytes, ...] = (GCM, CTR), macs: tuple[bytes, ...] = (ETM,),
            **kw: object) -> KexInit:
    return KexInit(kex, host_key, ciphers, ciphers, macs, macs, **kw)  # type: ignore[arg-type]


SERVER = kexinit((b"mlkem768x25519-sha256", b"curve25519-sha256", EXT_INFO_SERVER,
                  STRICT_KEX_SERVER), (b"ssh-ed25519", b"rsa-sha2-512"))

names = st.lists(st.binary(min_size=1, max_size=12).filter(lambda b: b"," not in b),
                 max_size=4).map(tuple)


class WireTests(SynchronousTestCase):
    """
    KEXINIT on the wire.
    """

    def test_layout(self) -> None:
        """
        Message number 20, 16 cookie bytes, ten name-lists (uint32 length and
        comma-joined names), the guess flag and a zero reserved word.
        """
        message = kexinit(cookie=b"C" * 16, first_kex_packet_follows=True).encode()
        expected = [b"\x14", b"C" * 16]
        for value in (b"curve25519-sha256", b"ssh-ed25519", GCM + b"," + CTR,
                      GCM + b"," + CTR, ETM, ETM, b"none", b"none", b"", b""):
            expected += [struct.pack("!I", len(value)), value]
        expected.append(b"\1\0\0\0\0")
        self.assertEqual(message, b"".join(expected))

    @SETTINGS
    @given(st.lists(names, min_size=10, max_size=10), st.booleans(),
           st.binary(min_size=16, max_size=16))
    def test_roundTrip(self, lists: list[tuple[bytes, ...]], follows: bool,
                       cookie: bytes) -> None:
        """
        What is encoded decodes to the same lists, flag and cookie.
        """
        original = KexInit(*lists, first_kex_packet_follows=follows,  # type: ignore[misc]
                           cookie=cookie)
        decoded = KexInit.decode(original.encode()[1:])
        self.assertEqual(decoded, original)
        self.assertEqual(decoded.cookie, cookie)

    def test_truncated(self) -> None:
        """
        A KEXINIT cut anywhere is refused.
        """
        message = SERVER.encode()[1:]
        for end in range(len(message) - 4):
            self.assertRaises(KexInitError, KexInit.decode, message[:end])

    def test_overrun(self) -> None:
        """
        A name-list longer than the message is refused.
        """
        message = b"C" * 16 + struct.pack("!I", 1000) + b"curve25519-sha256"
        self.assertRaises(KexInitError, KexInit.decode, message)

    @SETTINGS
    @given(st.binary(max_size=400))
    def test_garbage(self, data: bytes) -> None:
        """
        Random bytes decode or raise L{KexInitError}, nothing else.
        """
        with contextlib.suppress(KexInitError):
            KexInit.decode(data)

    def test_emptyNamesDropped(self) -> None:
        """
        Empty names (C{a,,b}, an empty list) are no names.
        """
        message = bytearray(b"C" * 16)
        for value in (b"a,,b", b"", b"x", b"x", b"m", b"m", b"none", b"none", b"", b""):
            message += struct.pack("!I", len(value)) + value
        message += bytes(5)
        decoded = KexInit.decode(bytes(message))
        self.assertEqual(decoded.kex, (b"a", b"b"))
        self.assertEqual(decoded.host_key, ())


class NegotiationTests(SynchronousTestCase):
    """
    Which algorithms two KEXINITs agree on.
    """

    def test_clientPreferenceWins(self) -> None:
        """
        In every category, the first of the client's list that the server
        lists too (RFC 4253): the server's order does not matter.
        """
        client = kexinit((b"curve25519-sha256", b"mlkem768x25519-sha256"),
                         (b"rsa-sha2-512", b"ssh-ed25519"), (CTR, GCM))
        agreed = negotiate(client, SERVER, AEAD)
        self.assertEqual((agreed.kex, agreed.host_key, agreed.cipher_client_to_server),
                         (b"curve25519-sha256", b"rsa-sha2-512", CTR))
        self.assertEqual(agreed.mac_client_to_server, ETM)

    def test_aeadTakesNoMAC(self) -> None:
        """
        With an AEAD cipher the MAC lists are not matched: a client with no
        MAC in common still agrees, and the MAC is L{None}.
        """
        client = kexinit(ciphers=(GCM,), macs=(b"hmac-sha1",))
        agreed = negotiate(client, SERVER, AEAD)
        self.assertEqual((agreed.cipher_server_to_client, agreed.mac_server_to_client),
                         (GCM, None))

    def test_noCommonMAC(self) -> None:
        """
        A non-AEAD cipher needs a common MAC; the error names the category
        and what the server offers.
        """
        client = kexinit(ciphers=(CTR,), macs=(b"hmac-sha2-256",))
        e = self.assertRaises(NegotiationError, negotiate, client, SERVER, AEAD)
        self.assertEqual(e.category, "MAC")
        self.assertEqual(e.describe(), b"no matching MAC algorithm; the server offers " + ETM)

    def test_noCommonKex(self) -> None:
        """
        No key exchange method in common: the server's real methods are
        named, not its pseudo-algorithms.
        """
        client = kexinit((b"diffie-hellman-group14-sha1", EXT_INFO_CLIENT))
        e = self.assertRaises(NegotiationError, negotiate, client, SERVER, AEAD)
        self.assertEqual(e.category, "key exchange")
        self.assertEqual(e.offered, (b"mlkem768x25519-sha256", b"curve25519-sha256"))

    def test_pseudoAlgorithmsNeverChosen(self) -> None:
        """
        A client that lists the server's pseudo-algorithms as methods gets
        none of them.
        """
        client = kexinit((EXT_INFO_SERVER, STRICT_KEX_SERVER, STRICT_KEX_CLIENT))
        e = self.assertRaises(NegotiationError, negotiate, client, SERVER, AEAD)
        self.assertEqual(e.category, "key exchange")

    def test_eachDirection(self) -> None:
        """
        Ciphers and MACs are agreed per direction.
        """
        client = KexInit((b"curve25519-sha256",), (b"ssh-ed25519",), (CTR,), (GCM,),
                         (ETM,), (b"hmac-sha1",))
        agreed = negotiate(client, SERVER, AEAD)
        self.assertEqual((agreed.cipher_client_to_server, agreed.mac_client_to_server,
                          agreed.cipher_server_to_client, agreed.mac_server_to_client),
                         (CTR, ETM, GCM, None))

    def test_guess(self) -> None:
        """
        A guess is wrong when the two sides' first key exchange method or
        first host key algorithm differ (pseudo-algorithms apart).
        """
        self.assertFalse(guessed_wrong(kexinit((b"mlkem768x25519-sha256", EXT_INFO_CLIENT)),
                                       SERVER))
        self.assertTrue(guessed_wrong(kexinit((b"curve25519-sha256",)), SERVER))
        self.assertTrue(guessed_wrong(
            kexinit((b"mlkem768x25519-sha256",), (b"rsa-sha2-512",)), SERVER))
