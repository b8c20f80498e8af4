"""
The relay's TLS port as TLS clients meet it: a real relay process, Python's C{ssl} and
C{openssl s_client}.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess

from nfltr.sni.twisted import NOT_TLS_RESPONSE

from .harness import StackTestCase, exchange

TIMEOUT = 20.0


class TLSPortTests(StackTestCase):
    """
    The SNI router in front of a running relay.
    """

    def setUp(self) -> None:
        super().setUp()
        host, port = self.stack.address.rsplit(":", 1)
        self.host, self.port = host, int(port)

    def handshake(self, server_name: str) -> ssl.SSLSocket:
        """
        A TLS connection to the relay asking for C{server_name}, verified with the relay's CA.
        """
        context = ssl.create_default_context(cafile=self.stack.ca)
        sock = socket.create_connection((self.host, self.port), timeout=TIMEOUT)
        try:
            return context.wrap_socket(sock, server_hostname=server_name)
        except BaseException:
            sock.close()
            raise

    def test_unknownNamePythonSSL(self) -> None:
        """
        Python's C{ssl} asking for C{unknown.localhost} fails its handshake on the relay's
        C{unrecognized_name} alert.
        """
        e = self.assertRaises(ssl.SSLError, self.handshake, "unknown.localhost")
        self.assertEqual(e.reason, "TLSV1_UNRECOGNIZED_NAME")

    def test_unknownNameOpenSSL(self) -> None:
        """
        C{openssl s_client -servername unknown.localhost} reports the fatal alert 112
        (unrecognized name) from the relay, having read the 7 bytes of the alert record and
        nothing else.
        """
        if shutil.which("openssl") is None:
            self.skipTest("openssl is not installed")
        done = subprocess.run(
            ["openssl", "s_client", "-connect", f"{self.host}:{self.port}",
             "-servername", "unknown.localhost", "-CAfile", self.stack.ca],
            input=b"", capture_output=True, timeout=TIMEOUT, check=False,
        )
        output = (done.stdout + done.stderr).decode(errors="replace")
        self.assertNotEqual(done.returncode, 0, output)
        self.assertIn("tlsv1 unrecognized name", output)
        self.assertIn("SSL alert number 112", output)
        self.assertIn("has read 7 bytes", output)

    def test_ownNameTerminated(self) -> None:
        """
        C{localhost} is the relay's own name: the relay ends TLS with a certificate the CA
        vouches for, and HTTP inside it that is no WebSocket upgrade gets 426.
        """
        with self.handshake("localhost") as tls:
            tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            received = b""
            while chunk := tls.recv(4096):
                received += chunk
        self.assertTrue(received.startswith(b"HTTP/1.1 426 "), received)

    def test_plainHTTP(self) -> None:
        """
        A plain HTTP request on the TLS port gets the 400 saying the port speaks TLS.
        """
        self.assertEqual(
            exchange(self.port, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"), NOT_TLS_RESPONSE
        )
