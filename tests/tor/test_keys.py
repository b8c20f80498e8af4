"""
Onion service keys and addresses (L{nfltr.tor._keys}): the address encoding of
rend-spec-v3, the expanded key ADD_ONION takes, the key file, client keys.
"""

from __future__ import annotations

import base64
import hashlib
import stat
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr import tor

seeds = st.binary(min_size=32, max_size=32)


class AddressTests(SynchronousTestCase):
    """
    C{tor.onion_address} and L{tor.OnionKey}.
    """

    @given(seeds)
    def test_addressDecodes(self, seed: bytes) -> None:
        """
        The address is 56 base32 characters and C{.onion}; decoded, it is the public key,
        a checksum of it that verifies, and version 3.
        """
        key = tor.OnionKey(seed)
        address = key.address
        self.assertRegex(address, r"^[a-z2-7]{56}\.onion$")
        self.assertEqual(key.service_id + ".onion", address)
        raw = base64.b32decode(key.service_id.upper())
        public = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
        self.assertEqual(raw[:32], public)
        self.assertEqual(raw[34:], b"\x03")
        check = hashlib.sha3_256(b".onion checksum" + public + b"\x03").digest()[:2]
        self.assertEqual(raw[32:34], check)

    def test_knownAddress(self) -> None:
        """
        The all-zero public key has the address its encoding gives by hand.
        """
        zero = bytes(32)
        check = hashlib.sha3_256(b".onion checksum" + zero + b"\x03").digest()[:2]
        expected = base64.b32encode(zero + check + b"\x03").decode().lower() + ".onion"
        self.assertEqual(tor.onion_address(zero), expected)
        self.assertTrue(expected.startswith("a" * 51))

    @given(seeds)
    def test_controlBlob(self, seed: bytes) -> None:
        """
        ADD_ONION's key is C{ED25519-V3:} and 64 bytes: SHA-512 of the seed, its scalar
        clamped (RFC 8032, 5.1.5), its second half unchanged.
        """
        kind, _, blob = tor.OnionKey(seed).control_blob().partition(":")
        self.assertEqual(kind, "ED25519-V3")
        expanded = base64.b64decode(blob)
        digest = hashlib.sha512(seed).digest()
        self.assertEqual(len(expanded), 64)
        self.assertEqual(expanded[0] & 7, 0)
        self.assertEqual(expanded[31] & 0xC0, 0x40)
        self.assertEqual(expanded[1:31], digest[1:31])
        self.assertEqual(expanded[32:], digest[32:])

    def test_isOnionHost(self) -> None:
        """
        Onion addresses, and names under them, are onion hosts; others are not.
        """
        self.assertTrue(tor.is_onion_host("abc.onion"))
        self.assertTrue(tor.is_onion_host("share.ABC.onion."))
        self.assertFalse(tor.is_onion_host("onion.example"))
        self.assertFalse(tor.is_onion_host("127.0.0.1"))


class KeyFileTests(SynchronousTestCase):
    """
    L{tor.load_or_create_key}.
    """

    def test_createdOnceKept(self) -> None:
        """
        The first call makes the key (0600, its directory 0700); later ones read the same.
        """
        path = Path(self.mktemp()) / "tor" / "onion.key"
        first = tor.load_or_create_key(path)
        self.assertEqual(stat.S_IMODE(path.stat().st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(path.parent.stat().st_mode), 0o700)
        self.assertEqual(tor.load_or_create_key(path), first)

    def test_notAKey(self) -> None:
        """
        A file that is not an Ed25519 key is an error naming the file.
        """
        path = Path(self.mktemp())
        path.write_text("not a key\n")
        with self.assertRaises(tor.OnionKeyError) as caught:
            tor.load_or_create_key(path)
        self.assertIn(str(path), str(caught.exception))


class ClientKeyTests(SynchronousTestCase):
    """
    Client authorization keys.
    """

    def test_forms(self) -> None:
        """
        A key is taken bare or with tor's C{descriptor:x25519:} prefix, any case.
        """
        keys = tor.new_client_keys()
        self.assertEqual(tor.parse_client_key(keys.public), keys.public)
        self.assertEqual(tor.parse_client_key(f"descriptor:x25519:{keys.public.lower()}\n"),
                         keys.public)

    def test_bad(self) -> None:
        """
        Anything else is an error quoting it.
        """
        for text in ("", "descriptor:x25519:", "AAAA", "descriptor:x25519:" + "A" * 60, "!!"):
            with self.assertRaises(tor.OnionKeyError):
                tor.parse_client_key(text)

    def test_file(self) -> None:
        """
        A keys file: one a line, comments and blank lines skipped; a bad line is named by
        number; an empty file is an error.
        """
        one, two = tor.new_client_keys(), tor.new_client_keys()
        path = Path(self.mktemp())
        path.write_text(f"# ours\n{one.public}\n\ndescriptor:x25519:{two.public}\n")
        self.assertEqual(tor.read_client_keys(path), (one.public, two.public))
        path.write_text(f"{one.public}\nnonsense\n")
        with self.assertRaises(tor.OnionKeyError) as caught:
            tor.read_client_keys(path)
        self.assertIn("line 2", str(caught.exception))
        path.write_text("# nothing\n")
        self.assertRaises(tor.OnionKeyError, tor.read_client_keys, path)
        self.assertRaises(tor.OnionKeyError, tor.read_client_keys, path.with_name("absent"))

    def test_authPrivateLine(self) -> None:
        """
        The client's line names the service without C{.onion} and the private key in base32.
        """
        keys = tor.new_client_keys()
        line = keys.auth_private_line("abc.onion")
        service, kind, algorithm, secret = line.split(":")
        self.assertEqual((service, kind, algorithm), ("abc", "descriptor", "x25519"))
        raw = base64.b32decode(secret + "=" * (-len(secret) % 8))
        self.assertEqual(raw, base64.b64decode(keys.private))
