"""
C{nfltr onion-client-key} (L{nfltr.cli.onion_keys}).
"""

from __future__ import annotations

import base64
import contextlib
import io

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli import main
from nfltr.tor import OnionKey, parse_client_key


def run(*args: str) -> tuple[int, list[str], str]:
    """
    Run C{nfltr ARGS}; its status, the lines it printed, and its standard error.
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue().splitlines(), err.getvalue()


class OnionClientKeyTests(SynchronousTestCase):
    """
    The printed lines make one key pair, in the forms the relay and tor take.
    """

    def test_pair(self) -> None:
        """
        The first line is a public key the relay's keys file takes; the private key of the
        control-port line and of the .auth_private line is its pair.
        """
        address = OnionKey(bytes(32)).address
        status, lines, _ = run("onion-client-key", "--address", address)
        self.assertEqual(status, 0)
        public = parse_client_key(lines[0])
        service = address.removesuffix(".onion")
        control = lines[1].split()
        self.assertEqual(control[-3:-1], ["ONION_CLIENT_AUTH_ADD", service])
        private = base64.b64decode(control[-1].removeprefix("x25519:"))
        derived = X25519PrivateKey.from_private_bytes(private).public_key().public_bytes_raw()
        self.assertEqual(base64.b32encode(derived).decode().rstrip("="), public)
        name, kind, algorithm, secret = lines[3].split(":")
        self.assertEqual((name, kind, algorithm), (service, "descriptor", "x25519"))
        self.assertEqual(base64.b32decode(secret + "=" * (-len(secret) % 8)), private)

    def test_badAddress(self) -> None:
        """
        An --address that is not an onion address: status 2 and a message naming it.
        """
        status, lines, err = run("onion-client-key", "--address", "example.com")
        self.assertEqual((status, lines), (2, []))
        self.assertIn("--address example.com", err)
